"""ONNX Runtime backend on the real RetinaFace model, provider-option building, and the factory's errors."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engines.backends.onnxruntime_engine import (
    OrtConfig,
    OrtEngine,
    provider_options,
    resolve_providers,
    route_extra,
    trt_profile_options,
)
from engines.engine import EngineError, TensorSpec, run_batched
from engines.factory import EngineConfig, create_engine, find_plan, ort_config_of
from engines.models.registry import get_spec
from engines.models.store import ModelStore


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

SPECS = (
    TensorSpec("target", "tensor(float)", ("N", 3, 128, 128)),
    TensorSpec("source", "tensor(float)", ("N", 512)),
)


def test_resolve_providers() -> None:
    assert resolve_providers(("tensorrt", "cuda", "cpu")) == [
        "TensorrtExecutionProvider",
        "CUDAExecutionProvider",
        "CPUExecutionProvider",
    ]
    with pytest.raises(EngineError):
        resolve_providers(())


def test_tensorrt_options_carry_deployment_settings(tmp_path: Path) -> None:
    cfg = OrtConfig(
        providers=("tensorrt", "cuda", "cpu"),
        device_id=1,
        max_batch=16,
        fp16=True,
        trt_engine_cache_dir=tmp_path / "e",
        trt_timing_cache_dir=tmp_path / "t",
        cudnn_conv_algo_search="DEFAULT",
    )
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
    cfg = ort_config_of(
        EngineConfig(
            providers=("tensorrt", "cpu"),
            trt_cache_dir=tmp_path,
            fp16=True,
            extra={"trt_builder_optimization_level": "5"},
        )
    )
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


# -- GPU provider set-up, checked without a GPU ------------------------------------------------------------

GPU_AVAILABLE = ["CUDAExecutionProvider", "CPUExecutionProvider"]


def test_trt_provider_profile_spans_the_detector_shapes() -> None:
    det = (TensorSpec("input", "tensor(float)", ("N", 3, "H", "W")),)
    cfg = OrtConfig(
        max_batch=8,
        opt_batch=4,
        input_shapes=(("input", (1, 3, 192, 320)), ("input", (1, 3, 320, 192)), ("input", (1, 3, 640, 640))),
    )
    opts = trt_profile_options(det, cfg)
    assert opts["trt_profile_min_shapes"] == "input:1x3x192x192"
    assert opts["trt_profile_opt_shapes"] == "input:4x3x192x320"
    assert opts["trt_profile_max_shapes"] == "input:8x3x640x640"


def test_pipeline_gives_the_detector_engine_its_shapes(
    model_store: ModelStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engines.pipeline as pl
    from engines.processors.face_detector import canvas_for

    seen: dict[str, EngineConfig] = {}
    real = pl.create_engine

    def recording(path: Path, config: EngineConfig, name: str | None = None) -> Any:
        seen[name or path.stem] = config
        return real(path, config, name=name)

    monkeypatch.setattr(pl, "create_engine", recording)
    pipe = pl.Pipeline.from_config(pl.PipelineConfig(detector_size=320), model_store)
    pipe.close()
    shapes = [s for n, s in seen["face_detector"].input_shapes if n == "input"]
    assert (1, 3, *canvas_for(720, 1280, 320)) in shapes and (1, 3, 320, 320) in shapes
    assert (1, 3, 640, 640) in shapes  # sources are detected at 640
    assert seen["face_landmarker"].input_shapes == ()  # FaceMesh's dims are static


def test_a_requested_gpu_provider_that_did_not_load_is_an_error(
    retinaface: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORT falls back to the CPU with a warning when CUDA cannot load: a silently slow gateway."""
    import onnxruntime as ort

    real = ort.InferenceSession

    def cpu_only(src: Any, sess_options: Any = None, providers: Any = None) -> Any:
        return real(src, sess_options=sess_options, providers=["CPUExecutionProvider"])

    monkeypatch.setattr(ort, "get_available_providers", lambda: GPU_AVAILABLE)
    monkeypatch.setattr(ort, "InferenceSession", cpu_only)
    with pytest.raises(EngineError, match="did not load CUDAExecutionProvider") as err:
        OrtEngine(retinaface, OrtConfig(providers=("cuda", "cpu")))
    assert "\n" not in str(err.value)
    OrtEngine(retinaface, OrtConfig(providers=("cpu",))).close()  # CPU asked, CPU got: fine


def test_each_gpu_provider_gets_only_its_own_raw_options() -> None:
    cfg = ort_config_of(
        EngineConfig(
            providers=("tensorrt", "cuda", "cpu"),
            extra={
                "trt_builder_optimization_level": "5",
                "gpu_mem_limit": "1024",
                "cuda:arena_extend_strategy": "kSameAsRequested",
            },
        )
    )
    opts = dict(provider_options(cfg, ()))
    trt, cuda = opts["TensorrtExecutionProvider"], opts["CUDAExecutionProvider"]
    assert trt["trt_builder_optimization_level"] == "5" and "gpu_mem_limit" not in trt
    assert cuda["gpu_mem_limit"] == "1024" and "trt_builder_optimization_level" not in cuda
    assert cuda["arena_extend_strategy"] == "kSameAsRequested" and "arena_extend_strategy" not in trt
    assert route_extra({"x": "1"}, ("cuda", "cpu")) == {"cuda": {"x": "1"}}
    with pytest.raises(EngineError, match="not configured"):
        route_extra({"tensorrt:x": "1"}, ("cuda",))


def test_fp16_on_the_cuda_provider_runs_an_fp16_graph(
    retinaface: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CUDA provider has no precision switch: --fp16 used to change nothing there."""
    import onnxruntime as ort

    import engines.backends.onnxruntime_engine as oe

    assert oe.needs_fp16_model(OrtConfig(providers=("cuda", "cpu"), fp16=True))
    assert not oe.needs_fp16_model(OrtConfig(providers=("tensorrt", "cuda"), fp16=True))  # TRT's own flag
    assert not oe.needs_fp16_model(OrtConfig(providers=("cuda",), fp16=False))
    loaded: list[Any] = []
    real = ort.InferenceSession

    def session(src: Any, sess_options: Any = None, providers: Any = None) -> Any:
        loaded.append(src)
        s = real(retinaface.read_bytes(), sess_options=sess_options, providers=["CPUExecutionProvider"])
        return type(
            "S",
            (),
            {
                "get_providers": lambda self: GPU_AVAILABLE,
                "get_inputs": lambda self: s.get_inputs(),
                "get_outputs": lambda self: s.get_outputs(),
            },
        )()

    monkeypatch.setattr(ort, "get_available_providers", lambda: GPU_AVAILABLE)
    monkeypatch.setattr(ort, "InferenceSession", session)
    monkeypatch.setattr(oe, "fp16_model", lambda model: b"fp16:" + Path(model).read_bytes()[:4])
    OrtEngine(retinaface, OrtConfig(providers=("cuda", "cpu"), fp16=True)).close()
    OrtEngine(retinaface, OrtConfig(providers=("cuda", "cpu"))).close()
    assert loaded[0] == b"fp16:" + retinaface.read_bytes()[:4] and loaded[1] == str(retinaface)
