"""Native TensorRT backend and ORT GPU providers on a real GPU (each skipped where its needs are not met).

The FaceMesh model is made batch-dynamic, built into a plan by scripts/build_engines.py, and every result is
compared with ONNX Runtime on CPU.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from engines.backends.onnxruntime_engine import OrtConfig, OrtEngine
from engines.engine import EngineError, run_batched
from engines.factory import EngineConfig, create_engine
from engines.models.registry import get_spec
from engines.models.store import ModelStore
from engines.onnx.batch import make_batch_dynamic_bytes

REPO = Path(__file__).resolve().parents[2]
needs_tensorrt = pytest.mark.needs("tensorrt")
ATOL = 2e-2  # TensorRT picks other kernels (TF32 on Ampere+); outputs are pixel coordinates up to ~192


@pytest.fixture(scope="module")
def facemesh_dyn(model_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = model_store.path(get_spec("facemesh_468"))
    out = tmp_path_factory.mktemp("models") / "face_landmark_468.dyn.onnx"
    out.write_bytes(make_batch_dynamic_bytes(src.read_bytes()))
    return out


@pytest.fixture(scope="module")
def plan_dir(facemesh_dyn: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plans")
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "build_engines.py"),
            str(facemesh_dyn),
            "--out-dir",
            str(out),
            "--max-batch",
            "8",
            "--opt-batch",
            "4",
            "--profiles",
            "2",
            "--workspace-gb",
            "1",
            "--timing-cache",
            str(out / "timing.cache"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def reference(facemesh_dyn: Path) -> OrtEngine:
    return OrtEngine(facemesh_dyn, OrtConfig(max_batch=8))


def _x(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((n, 3, 192, 192), dtype=np.float32)


def _close(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert set(a) == set(b)
    for k in a:
        assert a[k].shape == b[k].shape, k
        np.testing.assert_allclose(a[k], b[k], atol=ATOL, rtol=1e-2)


@needs_tensorrt
@pytest.mark.parametrize("graphs", [False, True])
def test_plan_matches_ort_cpu(facemesh_dyn: Path, plan_dir: Path, reference: OrtEngine, graphs: bool) -> None:
    plans = list(plan_dir.glob("face_landmark_468.trt*.fp32.b1-8.plan"))
    assert len(plans) == 1, list(plan_dir.iterdir())
    assert (plan_dir / "timing.cache").stat().st_size > 0
    eng = create_engine(
        facemesh_dyn,
        EngineConfig(backend="tensorrt", trt_cache_dir=plan_dir, max_batch=8, contexts=2, cuda_graphs=graphs),
    )
    try:
        assert eng.batch.min == 1 and eng.batch.max == 8
        for n in (1, 3, 8, 5, 3):  # 5 and 3 again: padded bucket replays when graphs are on
            x = _x(n, seed=n)
            _close(eng.infer({"input_1": x}), reference.infer({"input_1": x}))
        x = _x(11, seed=11)
        head, tail = reference.infer({"input_1": x[:8]}), reference.infer({"input_1": x[8:]})
        _close(run_batched(eng, {"input_1": x}), {k: np.concatenate([head[k], tail[k]]) for k in head})
    finally:
        eng.close()
        eng.close()
    with pytest.raises(EngineError, match="closed"):
        eng.infer({"input_1": _x(1)})


@needs_tensorrt
def test_concurrent_threads_use_separate_contexts(
    facemesh_dyn: Path, plan_dir: Path, reference: OrtEngine
) -> None:
    eng = create_engine(
        facemesh_dyn, EngineConfig(backend="tensorrt", trt_cache_dir=plan_dir, max_batch=8, contexts=2)
    )
    inputs = [_x(4, seed=100 + i) for i in range(6)]
    expected = [reference.infer({"input_1": x}) for x in inputs]
    got: dict[int, dict[str, np.ndarray]] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                got[i] = eng.infer({"input_1": inputs[i]})
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    eng.close()
    assert not errors
    for i in range(6):
        _close(got[i], expected[i])


@pytest.mark.needs("ort_gpu")
def test_ort_cuda_provider_matches_cpu(facemesh_dyn: Path, reference: OrtEngine) -> None:
    eng = OrtEngine(facemesh_dyn, OrtConfig(providers=("cuda", "cpu"), max_batch=8))
    assert eng.providers[0] == "CUDAExecutionProvider"
    x = _x(3)
    _close(eng.infer({"input_1": x}), reference.infer({"input_1": x}))
    eng.close()
