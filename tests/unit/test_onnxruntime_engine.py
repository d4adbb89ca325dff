"""ONNX Runtime backend on the real RetinaFace model, provider-option building, and the factory's errors."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from engines.engine import EngineError, TensorSpec, run_batched
from engines.factory import EngineConfig, create_engine, find_plan, ort_config_of
from engines.models.registry import get_spec
from engines.models.store import ModelStore
from engines.onnxruntime_engine import (
    OrtConfig,
    OrtEngine,
    provider_options,
    resolve_providers,
    trt_profile_options,
)


@pytest.fixture(scope="module")
def retinaface(model_store: ModelStore) -> Path:
    return model_store.path(get_spec("retinaface_mnet025"))


def _frames(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 3, 96, 128)).astype(np.float32) * 50


def test_retinaface_batch_1_and_3_match_item_by_item(retinaface: Path) -> None:
    eng = create_engine(retinaface, EngineConfig(intra_op_threads=1, max_batch=4), name="det")
    try:
        assert eng.name == "det" and eng.batch.min == 1 and eng.batch.max == 4
        assert [s.name for s in eng.inputs] == ["input"]
        x = _frames(3)
        batched = eng.infer({"input": x})
        assert set(batched) == {o.name for o in eng.outputs}
        for k, v in batched.items():
            assert v.shape[0] == 3, k
        for i in range(3):
            single = eng.infer({"input": x[i : i + 1]})
            for k in batched:
                np.testing.assert_allclose(batched[k][i : i + 1], single[k], atol=1e-4, rtol=1e-4)
        # 6 items through a max-4 engine: split, order kept
        six = run_batched(eng, {"input": np.concatenate([x, x])})
        for k in batched:
            np.testing.assert_allclose(six[k][3:], batched[k], atol=1e-4, rtol=1e-4)
    finally:
        eng.close()


def test_one_session_shared_by_threads(retinaface: Path) -> None:
    eng = OrtEngine(retinaface, OrtConfig(intra_op_threads=1, max_batch=2))
    x = _frames(2, seed=3)
    expect = eng.infer({"input": x})
    results: list[dict[str, np.ndarray]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(eng.infer({"input": x}))
        except BaseException as e:  # noqa: BLE001 - surfaced by the assert below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    eng.close()
    assert not errors and len(results) == 3
    for r in results:
        for k in expect:
            np.testing.assert_allclose(r[k], expect[k], atol=1e-5)


def test_close_is_idempotent_and_infer_after_close_fails(retinaface: Path) -> None:
    eng = OrtEngine(retinaface, OrtConfig(intra_op_threads=1))
    eng.close()
    eng.close()
    with pytest.raises(EngineError, match="closed"):
        eng.infer({"input": _frames(1)})


def test_bad_input_is_an_engine_error(retinaface: Path) -> None:
    eng = OrtEngine(retinaface, OrtConfig(intra_op_threads=1))
    with pytest.raises(EngineError, match="inference failed"):
        eng.infer({"input": np.zeros((1, 5, 32, 32), np.float32)})
    eng.close()


def test_unknown_provider_is_one_clear_line(retinaface: Path) -> None:
    with pytest.raises(EngineError, match="unknown ONNX Runtime provider 'rocm'") as err:
        create_engine(retinaface, EngineConfig(providers=("rocm",)))
    assert "\n" not in str(err.value)


def test_unavailable_provider_names_the_install(retinaface: Path) -> None:
    import onnxruntime as ort

    if "TensorrtExecutionProvider" in ort.get_available_providers():
        pytest.skip("TensorRT provider is installed here")
    with pytest.raises(EngineError, match=r"livefuse\[gpu\]") as err:
        create_engine(retinaface, EngineConfig(providers=("tensorrt", "cuda", "cpu")))
    assert "\n" not in str(err.value)


def test_missing_model_file(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="not found"):
        OrtEngine(tmp_path / "nope.onnx")


def test_unknown_backend() -> None:
    with pytest.raises(EngineError, match="unknown engine backend"):
        create_engine(Path("x.onnx"), EngineConfig(backend="openvino"))


# -- provider options as pure functions ------------------------------------------------------------------

SPECS = (TensorSpec("target", "tensor(float)", ("N", 3, 128, 128)),
         TensorSpec("source", "tensor(float)", ("N", 512)))


def test_resolve_providers() -> None:
    assert resolve_providers(("tensorrt", "cuda", "cpu")) == [
        "TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    with pytest.raises(EngineError):
        resolve_providers(())


def test_tensorrt_options_carry_deployment_settings(tmp_path: Path) -> None:
    cfg = OrtConfig(providers=("tensorrt", "cuda", "cpu"), device_id=1, max_batch=16, fp16=True,
                    trt_engine_cache_dir=tmp_path / "e", trt_timing_cache_dir=tmp_path / "t",
                    cudnn_conv_algo_search="DEFAULT")
    (trt_name, trt), (cuda_name, cuda), (cpu_name, cpu) = provider_options(cfg, SPECS)
    assert trt_name == "TensorrtExecutionProvider" and cuda_name == "CUDAExecutionProvider"
    assert cpu_name == "CPUExecutionProvider" and cpu == {}
    assert trt["device_id"] == "1" and trt["trt_fp16_enable"] == "1"
    assert trt["trt_engine_cache_enable"] == "1" and trt["trt_engine_cache_path"] == str(tmp_path / "e")
    assert trt["trt_timing_cache_enable"] == "1" and trt["trt_timing_cache_path"] == str(tmp_path / "t")
    assert trt["trt_profile_min_shapes"] == "target:1x3x128x128,source:1x512"
    assert trt["trt_profile_opt_shapes"] == "target:8x3x128x128,source:8x512"
    assert trt["trt_profile_max_shapes"] == "target:16x3x128x128,source:16x512"
    assert cuda == {"device_id": "1", "cudnn_conv_algo_search": "DEFAULT"}


def test_trt_profiles_need_static_non_batch_dims() -> None:
    det = (TensorSpec("input", "tensor(float)", ("N", 3, "H", "W")),)
    assert trt_profile_options(det, OrtConfig(max_batch=4)) == {}
    cfg = OrtConfig(max_batch=4, opt_batch=2, input_shapes=(("input", (1, 3, 640, 640)),))
    assert trt_profile_options(det, cfg)["trt_profile_opt_shapes"] == "input:2x3x640x640"
    fixed = (TensorSpec("input_1", "tensor(float)", (1, 3, 192, 192)),)
    assert trt_profile_options(fixed, OrtConfig()) == {}


def test_bad_cudnn_search_rejected() -> None:
    with pytest.raises(EngineError, match="cudnn_conv_algo_search"):
        provider_options(OrtConfig(providers=("cuda",), cudnn_conv_algo_search="FAST"), ())


def test_engine_config_maps_caches_and_extra(tmp_path: Path) -> None:
    cfg = ort_config_of(EngineConfig(providers=("tensorrt", "cpu"), trt_cache_dir=tmp_path, fp16=True,
                                     extra={"trt_builder_optimization_level": "5"}))
    assert cfg.trt_engine_cache_dir == tmp_path / "ort-engines" and cfg.fp16
    opts = dict(provider_options(cfg, SPECS))
    assert opts["TensorrtExecutionProvider"]["trt_builder_optimization_level"] == "5"
    assert "trt_builder_optimization_level" not in opts["CPUExecutionProvider"]


# -- native TensorRT selection without a GPU -------------------------------------------------------------

def test_native_tensorrt_without_plans_names_the_build_command(tmp_path: Path) -> None:
    cfg = EngineConfig(backend="tensorrt", trt_cache_dir=tmp_path, max_batch=8, fp16=True)
    with pytest.raises(EngineError, match="build_engines.py") as err:
        create_engine(Path("/models/inswapper_128.dyn.onnx"), cfg)
    msg = str(err.value)
    assert "no TensorRT plan for inswapper_128" in msg and "--max-batch 8" in msg
    assert "--precision fp16" in msg
    assert "\n" not in msg


def test_native_tensorrt_needs_a_plan_dir() -> None:
    with pytest.raises(EngineError, match="trt_cache_dir"):
        find_plan(Path("m.onnx"), EngineConfig(backend="tensorrt"))


def test_native_tensorrt_without_gpu_libs_is_one_line(tmp_path: Path) -> None:
    try:
        import tensorrt  # noqa: F401
        pytest.skip("tensorrt is installed here")
    except ImportError:
        pass
    (tmp_path / "m.trt10.13.sm90.fp32.b1-8.plan").write_bytes(b"x")
    with pytest.raises(EngineError) as err:
        create_engine(Path("m.onnx"), EngineConfig(backend="tensorrt", trt_cache_dir=tmp_path))
    assert str(err.value) == "TensorRT backend needs an NVIDIA GPU and `pip install 'livefuse[gpu]'`"


def test_intra_op_spinning_is_off_unless_asked(retinaface: Path) -> None:
    """Spinning ORT threads starve the codecs that share the cores (p95 86 ms vs 39 ms at 3 streams here)."""
    for spin, expected in ((False, "0"), (True, "1")):
        eng = create_engine(retinaface, EngineConfig(ort_spinning=spin), name="det")
        try:
            opts = eng._session.get_session_options()  # type: ignore[attr-defined]
            assert opts.get_session_config_entry("session.intra_op.allow_spinning") == expected
        finally:
            eng.close()
