"""The torch backend on CUDA: fp32 and fp16 against ONNX Runtime on the CPU, CUDA graphs captured at warm-up
for every bucket and shape, concurrent slots. Tolerances as in
tests/unit/engines/backends/test_torch_engine.py, with fp32 at 2e-2 (cuDNN may pick TF32 kernels)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from engines.backends.onnxruntime_engine import OrtConfig, OrtEngine
from engines.factory import EngineConfig, create_engine
from engines.models.registry import get_spec
from engines.models.store import ModelStore
from engines.onnx.model_cache import serving_model
from engines.processors.face_detector import detector_input_shapes

pytestmark = pytest.mark.needs("torch_cuda")
ATOL = {
    False: {"mesh": 2e-2, "offset": 2e-2, "score": 1e-3},
    True: {"mesh": 0.5, "offset": 0.15, "score": 2e-3},
}


@pytest.fixture(scope="module")
def facemesh(model_store: ModelStore) -> Path:
    return serving_model(model_store.path(get_spec("facemesh_468")))


@pytest.fixture(scope="module")
def retinaface(model_store: ModelStore) -> Path:
    return model_store.path(get_spec("retinaface_mnet025"))


def _close(got: dict[str, np.ndarray], want: dict[str, np.ndarray], atol: dict[str, float]) -> None:
    for k in want:
        assert got[k].shape == want[k].shape, k
        assert float(np.abs(got[k] - want[k]).max()) <= atol[k], k


@pytest.mark.parametrize("fp16", [False, True])
def test_facemesh_on_cuda_matches_ort_cpu_and_replays_warm_graphs(facemesh: Path, fp16: bool) -> None:
    ref = OrtEngine(facemesh, OrtConfig(max_batch=16))
    eng = create_engine(
        facemesh, EngineConfig(backend="torch", providers=("cuda",), fp16=fp16, max_batch=16, contexts=2)
    )
    try:
        warm = eng.captured()  # type: ignore[attr-defined]
        assert [dict(k)["input_1"][0] for k in warm] == [1, 2, 4, 8, 16]
        for n in (1, 3, 16, 5):
            x = np.random.default_rng(n).random((n, 3, 192, 192), dtype=np.float32)
            _close(
                eng.infer({"input_1": x}),
                ref.infer({"input_1": x}),
                {o.name: ATOL[fp16]["mesh"] for o in ref.outputs},
            )
        assert eng.captured() == warm  # type: ignore[attr-defined]  # nothing captured on the live path
    finally:
        eng.close()


@pytest.mark.parametrize("fp16", [False, True])
def test_retinaface_on_cuda_every_detector_shape_is_warm(retinaface: Path, fp16: bool) -> None:
    shapes = detector_input_shapes(320, 640)
    ref = OrtEngine(retinaface, OrtConfig(max_batch=8))
    eng = create_engine(
        retinaface,
        EngineConfig(
            backend="torch", providers=("cuda",), fp16=fp16, max_batch=8, contexts=1, input_shapes=shapes
        ),
    )
    try:
        warm = eng.captured()  # type: ignore[attr-defined]
        assert len(warm) == len(shapes) * 4  # buckets 1, 2, 4, 8
        atol = {"loc": ATOL[fp16]["offset"], "landmarks": ATOL[fp16]["offset"], "conf": ATOL[fp16]["score"]}
        for n, (_, (_, _, h, w)) in zip((1, 3, 2, 1, 5), shapes, strict=True):
            x = np.random.default_rng(h * w + n).random((n, 3, h, w), dtype=np.float32) * 255 - 110
            _close(eng.infer({"input": x}), ref.infer({"input": x}), atol)
        assert eng.captured() == warm  # type: ignore[attr-defined]
    finally:
        eng.close()


def test_concurrent_threads_on_cuda_slots(facemesh: Path) -> None:
    ref = OrtEngine(facemesh, OrtConfig(max_batch=8))
    eng = create_engine(facemesh, EngineConfig(backend="torch", providers=("cuda",), max_batch=8, contexts=2))
    inputs = [np.random.default_rng(50 + i).random((4, 3, 192, 192), dtype=np.float32) for i in range(6)]
    want = [ref.infer({"input_1": x}) for x in inputs]
    got: dict[int, dict[str, np.ndarray]] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(10):
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
        _close(got[i], want[i], {o.name: ATOL[False]["mesh"] for o in ref.outputs})


@pytest.mark.parametrize("fp16", [False, True])
def test_infer_tensors_on_cuda_replays_the_same_graphs_and_keeps_its_outputs(
    facemesh: Path, fp16: bool
) -> None:
    """`infer_tensors` takes the same per-shape graphs as `infer` (nothing captured on the live path), gives
    float32 on the device, close to `infer` on the same inputs, and its outputs survive the next replay on
    the slot (copies, not the graph's static outputs)."""
    import torch

    eng = create_engine(
        facemesh, EngineConfig(backend="torch", providers=("cuda",), fp16=fp16, max_batch=8, contexts=1)
    )
    try:
        warm = eng.captured()  # type: ignore[attr-defined]
        x = np.random.default_rng(3).random((3, 3, 192, 192), dtype=np.float32)
        want = eng.infer({"input_1": x})
        got = eng.infer_tensors({"input_1": torch.from_numpy(x).to(eng.device)})  # type: ignore[attr-defined]
        first = {k: v.clone() for k, v in got.items()}
        zeros = torch.zeros((3, 3, 192, 192), device=eng.device)  # type: ignore[attr-defined]
        eng.infer_tensors({"input_1": zeros})  # type: ignore[attr-defined]
        for k in want:
            assert got[k].device.type == "cuda" and got[k].dtype == torch.float32
            assert torch.equal(got[k], first[k]), k  # not overwritten by the second replay
            assert float(np.abs(got[k].cpu().numpy() - want[k]).max()) <= ATOL[fp16]["mesh"], k
        assert eng.captured() == warm  # type: ignore[attr-defined]
    finally:
        eng.close()
