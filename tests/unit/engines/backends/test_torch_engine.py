"""The torch backend (onnx2torch) on CPU torch against ONNX Runtime on the CPU, on the project's real models.

Tolerances: fp32 within 1e-3 absolute (FaceMesh points are pixels up to ~192, RetinaFace offsets are prior
units); fp16 within 0.5 px on FaceMesh points and 0.15 on RetinaFace's box/landmark offsets (x 0.1 variance x
the prior's size: under 1 px at 320), 2e-3 on its scores.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engines.backends.onnxruntime_engine import OrtConfig, OrtEngine
from engines.backends.torch_engine import TorchConfig, TorchEngine, import_torch
from engines.engine import DeviceTensorEngine, EngineError, run_batched, run_batched_tensors
from engines.factory import EngineConfig, create_engine, torch_config_of
from engines.models.registry import get_spec
from engines.models.store import ModelStore
from engines.onnx.model_cache import serving_model
from engines.onnx.specialise import has_shape_ops, inline_identities, specialise

try:
    import_torch()
except EngineError as e:  # the dev install has it (Makefile); a bare install skips with the hint
    pytest.skip(str(e), allow_module_level=True)

FP32_ATOL = 1e-3
FP16_MESH_ATOL = 0.5
FP16_OFFSET_ATOL = 0.15
FP16_SCORE_ATOL = 2e-3


@pytest.fixture(scope="module")
def facemesh(model_store: ModelStore) -> Path:
    return serving_model(model_store.path(get_spec("facemesh_468")))


@pytest.fixture(scope="module")
def retinaface(model_store: ModelStore) -> Path:
    return model_store.path(get_spec("retinaface_mnet025"))


def _close(got: dict[str, np.ndarray], want: dict[str, np.ndarray], atol: dict[str, float]) -> None:
    assert set(got) == set(want)
    for k in want:
        assert got[k].shape == want[k].shape and got[k].dtype == np.float32, k
        err = float(np.abs(got[k] - want[k]).max())
        assert err <= atol[k], f"{k}: max abs diff {err} > {atol[k]}"


@pytest.mark.parametrize("fp16", [False, True])
def test_facemesh_matches_ort_cpu(facemesh: Path, fp16: bool) -> None:
    ref = OrtEngine(facemesh, OrtConfig(max_batch=8))
    eng = TorchEngine(facemesh, TorchConfig(fp16=fp16, max_batch=8, workers=1))
    try:
        assert eng.batch.min == 1 and eng.batch.max == 8 and eng.device == "cpu"
        assert [s.name for s in eng.inputs] == [s.name for s in ref.inputs]
        atol = FP16_MESH_ATOL if fp16 else FP32_ATOL
        for n in (1, 3):
            x = np.random.default_rng(n).random((n, 3, 192, 192), dtype=np.float32)
            _close(eng.infer({"input_1": x}), ref.infer({"input_1": x}), {o.name: atol for o in ref.outputs})
    finally:
        eng.close()
        eng.close()  # idempotent
    with pytest.raises(EngineError, match="closed"):
        eng.infer({"input_1": np.zeros((1, 3, 192, 192), np.float32)})


@pytest.mark.parametrize("fp16", [False, True])
def test_retinaface_matches_ort_cpu_at_square_and_16_9(retinaface: Path, fp16: bool) -> None:
    """RetinaFace computes shapes at run time: each shape runs a specialised copy sharing the weights."""
    shapes = (("input", (1, 3, 320, 320)), ("input", (1, 3, 192, 320)))
    ref = OrtEngine(retinaface, OrtConfig(max_batch=4))
    eng = create_engine(
        retinaface, EngineConfig(backend="torch", max_batch=4, fp16=fp16, contexts=1, input_shapes=shapes)
    )
    try:
        offsets = FP16_OFFSET_ATOL if fp16 else FP32_ATOL
        atol = {"loc": offsets, "landmarks": offsets, "conf": FP16_SCORE_ATOL if fp16 else FP32_ATOL}
        for n, (h, w) in ((1, (320, 320)), (2, (192, 320)), (1, (192, 320))):
            x = np.random.default_rng(h + n).random((n, 3, h, w), dtype=np.float32) * 255 - 110
            _close(eng.infer({"input": x}), ref.infer({"input": x}), atol)
    finally:
        eng.close()


@pytest.mark.parametrize("fp16", [False, True])
def test_infer_tensors_equals_infer(facemesh: Path, fp16: bool) -> None:
    """The device-tensor entry (`DeviceTensorEngine`) runs the same forward as `infer`: on CPU torch the
    outputs are bit-identical, float32 even for fp16 (as `infer`), split and padded as `run_batched`, and the
    caller's to keep (a second call does not change the first's)."""
    import torch

    eng = TorchEngine(facemesh, TorchConfig(fp16=fp16, max_batch=2, workers=1))
    ort = OrtEngine(facemesh, OrtConfig(max_batch=2))
    try:
        assert isinstance(eng, DeviceTensorEngine) and not isinstance(ort, DeviceTensorEngine)
        x = np.random.default_rng(7).random((3, 3, 192, 192), dtype=np.float32)
        want = run_batched(eng, {"input_1": x})
        got = run_batched_tensors(eng, {"input_1": torch.from_numpy(x.copy())})
        assert set(got) == set(want)
        for k in want:
            assert got[k].dtype == torch.float32 and got[k].device.type == "cpu"
            assert np.array_equal(got[k].numpy(), want[k]), k
        kept = {k: v.clone() for k, v in got.items()}
        eng.infer_tensors({"input_1": torch.zeros((2, 3, 192, 192))})
        assert all(torch.equal(got[k], kept[k]) for k in got)
        with pytest.raises(EngineError, match="is on meta"):
            eng.infer_tensors({"input_1": torch.zeros((1, 3, 192, 192), device="meta")})
    finally:
        eng.close()
    with pytest.raises(EngineError, match="closed"):
        eng.infer_tensors({"input_1": torch.zeros((1, 3, 192, 192))})


def test_specialised_retinaface_has_no_shape_ops(retinaface: Path) -> None:
    import onnx

    proto = onnx.load(str(retinaface))
    assert has_shape_ops(proto)
    fixed = specialise(proto, {"input": (2, 3, 192, 320)})
    assert not has_shape_ops(fixed)
    big = sum(int(np.prod(i.dims)) for i in proto.graph.initializer)
    assert sum(int(np.prod(i.dims)) for i in fixed.graph.initializer) == big  # weights kept, not folded
    got = OrtEngine(fixed.SerializeToString(), OrtConfig(max_batch=2))
    want = OrtEngine(retinaface, OrtConfig(max_batch=2))
    x = np.random.default_rng(0).random((2, 3, 192, 320), dtype=np.float32) * 100
    _close(got.infer({"input": x}), want.infer({"input": x}), {o.name: 1e-5 for o in want.outputs})


def test_run_batched_splits_and_the_factory_maps_devices(facemesh: Path) -> None:
    eng = create_engine(facemesh, EngineConfig(backend="torch", max_batch=2, contexts=1))
    ref = OrtEngine(facemesh, OrtConfig(max_batch=8))
    x = np.random.default_rng(5).random((5, 3, 192, 192), dtype=np.float32)
    want = ref.infer({"input_1": x})
    _close(run_batched(eng, {"input_1": x}), want, {o.name: FP32_ATOL for o in ref.outputs})
    eng.close()
    cfg = torch_config_of(EngineConfig(backend="torch", providers=("cuda",), device_id=1, fp16=True))
    assert cfg.device == "cuda:1" and cfg.fp16 and cfg.cuda_graphs
    with pytest.raises(EngineError, match="cpu or cuda"):
        torch_config_of(EngineConfig(backend="torch", providers=("tensorrt",)))


def test_cuda_asked_without_cuda_is_one_line_error(facemesh: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(EngineError, match="no CUDA device") as err:
        TorchEngine(facemesh, TorchConfig(device="cuda:0"))
    assert "\n" not in str(err.value)


def test_shape_tensors_stay_on_the_host_and_weights_go_to_the_device(retinaface: Path) -> None:
    """onnx2torch reads reshape targets, pads and sizes back with `.tolist()`: on CUDA that is a host sync
    per op and fails a graph capture, so integer buffers stay on the CPU ("meta" stands in for CUDA here)."""
    import onnx

    from engines.backends.torch_engine import to_device_keeping_indices

    _, onnx2torch = import_torch()
    fixed = specialise(inline_identities(onnx.load(str(retinaface))), {"input": (1, 3, 192, 320)})
    module = to_device_keeping_indices(onnx2torch.convert(fixed), "meta")
    ints = [b for b in module.buffers() if not b.is_floating_point()]
    floats = [t for t in (*module.parameters(), *module.buffers()) if t.is_floating_point()]
    assert ints and all(b.device.type == "cpu" for b in ints)
    assert floats and all(t.device.type == "meta" for t in floats)
