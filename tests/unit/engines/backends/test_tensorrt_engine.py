"""TrtEngine's buffer, shape, padding and CUDA-graph logic against an in-process fake of TensorRT + cudart.

The fake keeps "device" memory in ordinary host buffers and its network computes y = 2x + 1, so every byte
the engine copies, every shape it sets and every graph it captures and replays is checked on CPU. The real
GPU path is covered by tests/gpu.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import engines.backends.tensorrt_engine as te
from engines.engine import EngineError, run_batched

FEAT = 4


class FakeCudart:
    def __init__(self) -> None:
        self.cudaError_t = SimpleNamespace(cudaSuccess=0)
        self.cudaMemcpyKind = SimpleNamespace(cudaMemcpyHostToDevice=1, cudaMemcpyDeviceToHost=2)
        self.cudaStreamCaptureMode = SimpleNamespace(cudaStreamCaptureModeThreadLocal=1)
        self.cudaDeviceAttr = SimpleNamespace(
            cudaDevAttrComputeCapabilityMajor=75, cudaDevAttrComputeCapabilityMinor=76
        )
        self.cudaStreamNonBlocking = 1
        self.buffers: dict[int, Any] = {}
        self.freed: list[int] = []
        self.capturing: dict[int, list[Any]] = {}
        self.launches = 0
        self.streams = 0

    def _alloc(self, size: int) -> tuple[int, int]:
        buf = (ctypes.c_uint8 * size)()
        addr = ctypes.addressof(buf)
        self.buffers[addr] = buf
        return 0, addr

    cudaMalloc = _alloc
    cudaMallocHost = _alloc

    def cudaFree(self, ptr: int) -> tuple[int]:
        self.freed.append(ptr)
        return (0,)

    cudaFreeHost = cudaFree

    def cudaMemcpyAsync(self, dst: int, src: int, count: int, kind: int, stream: int) -> tuple[int]:
        assert dst in self.buffers and src in self.buffers
        assert count <= len(self.buffers[dst]) and count <= len(self.buffers[src])
        ctypes.memmove(dst, src, count)
        return (0,)

    def cudaStreamCreateWithFlags(self, flags: int) -> tuple[int, int]:
        self.streams += 1
        return 0, self.streams

    def cudaStreamSynchronize(self, stream: int) -> tuple[int]:
        return (0,)

    def cudaStreamDestroy(self, stream: int) -> tuple[int]:
        return (0,)

    def cudaSetDevice(self, device: int) -> tuple[int]:
        return (0,)

    def cudaGetErrorString(self, err: int) -> tuple[int, bytes]:
        return 0, b"fake error"

    def cudaDeviceGetAttribute(self, attr: int, device: int) -> tuple[int, int]:
        return 0, 9 if attr == 75 else 0

    def cudaStreamBeginCapture(self, stream: int, mode: int) -> tuple[int]:
        self.capturing[stream] = []
        return (0,)

    def cudaStreamEndCapture(self, stream: int) -> tuple[int, list[Any]]:
        return 0, self.capturing.pop(stream)

    def cudaGraphInstantiate(self, graph: list[Any], flags: int) -> tuple[int, list[Any]]:
        return 0, list(graph)

    def cudaGraphLaunch(self, exec_graph: list[Any], stream: int) -> tuple[int]:
        self.launches += 1
        for op in exec_graph:
            op()
        return (0,)

    def cudaGraphDestroy(self, graph: Any) -> tuple[int]:
        return (0,)

    cudaGraphExecDestroy = cudaGraphDestroy


class FakeContext:
    def __init__(self, cudart: FakeCudart, runs: list[int], feats: tuple[int, ...] = (FEAT,)) -> None:
        self.cudart = cudart
        self.feats = feats
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.addr: dict[str, int] = {}
        self.runs = runs

    def set_optimization_profile_async(self, index: int, stream: int) -> bool:
        self.profile = index
        return True

    def set_input_shape(self, name: str, shape: tuple[int, ...]) -> bool:
        if not 1 <= shape[0] <= 8 or len(shape) != 2 or shape[1] not in self.feats:
            return False
        self.shapes[name] = tuple(shape)
        return True

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return self.shapes["x"]

    def set_tensor_address(self, name: str, ptr: int) -> bool:
        self.addr[name] = ptr
        return True

    def execute_async_v3(self, stream: int) -> bool:
        n, f = self.shapes["x"]
        src, dst = self.addr["x"], self.addr["y"]

        def op() -> None:  # the shape is the one set when it was recorded, as in a captured CUDA graph
            self.runs.append(n)
            x = np.ctypeslib.as_array((ctypes.c_float * (n * f)).from_address(src))
            y = np.ctypeslib.as_array((ctypes.c_float * (n * f)).from_address(dst))
            y[:] = 2 * x + 1

        if stream in self.cudart.capturing:
            self.cudart.capturing[stream].append(op)
        else:
            op()
        return True


class FakeCudaEngine:
    num_io_tensors = 2
    num_optimization_profiles = 2

    def __init__(self, cudart: FakeCudart, feats: tuple[int, ...] = (FEAT,)) -> None:
        self.cudart = cudart
        self.runs: list[int] = []
        self.feats = feats

    def get_tensor_name(self, i: int) -> str:
        return ["x", "y"][i]

    def get_tensor_mode(self, name: str) -> str:
        return "IN" if name == "x" else "OUT"

    def get_tensor_dtype(self, name: str) -> str:
        return "DataType.FLOAT"

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return (-1, FEAT) if len(self.feats) == 1 else (-1, -1)

    def get_tensor_profile_shape(self, name: str, profile: int) -> list[tuple[int, ...]]:
        return [(1, min(self.feats)), (4, self.feats[0]), (8, max(self.feats))]

    def create_execution_context(self) -> FakeContext:
        return FakeContext(self.cudart, self.runs, self.feats)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, FakeCudart]:
    cudart = FakeCudart()
    engine = FakeCudaEngine(cudart)
    trt = SimpleNamespace(
        Logger=SimpleNamespace(WARNING=2),
        TensorIOMode=SimpleNamespace(INPUT="IN", OUTPUT="OUT"),
    )
    trt.Logger = type("Logger", (), {"WARNING": 2, "__init__": lambda self, level: None})
    trt.Runtime = lambda logger: SimpleNamespace(deserialize_cuda_engine=lambda data: engine)
    monkeypatch.setattr(te, "_import_gpu", lambda: (trt, cudart))
    return engine, cudart


def test_fake_plan_infers_every_batch_size(fake: tuple[Any, FakeCudart]) -> None:
    engine, cudart = fake
    eng = te.TrtEngine(b"plan", te.TrtConfig(contexts=4), name="m")
    assert eng.contexts == 2  # capped by the plan's two profiles
    assert eng.batch.min == 1 and eng.batch.max == 8
    assert eng.inputs[0].dtype == "float32" and eng.inputs[0].shape == (None, FEAT)
    for n in (1, 3, 8):
        x = np.arange(n * FEAT, dtype=np.float32).reshape(n, FEAT)
        np.testing.assert_array_equal(eng.infer({"x": x})["y"], 2 * x + 1)
    with pytest.raises(EngineError, match="outside"):
        eng.infer({"x": np.zeros((9, FEAT), np.float32)})
    with pytest.raises(EngineError, match="missing inputs"):
        eng.infer({"z": np.zeros((1, FEAT), np.float32)})
    x = np.random.default_rng(0).standard_normal((19, FEAT)).astype(np.float32)
    np.testing.assert_allclose(run_batched(eng, {"x": x})["y"], 2 * x + 1, rtol=1e-6)
    eng.close()
    eng.close()
    assert len(cudart.freed) == 2 * 2 * 2  # 2 contexts x 2 tensors x (device + pinned)
    with pytest.raises(EngineError, match="closed"):
        eng.infer({"x": x[:1]})


def test_fake_plan_cuda_graph_buckets_pad_and_replay(fake: tuple[Any, FakeCudart]) -> None:
    engine, cudart = fake
    eng = te.TrtEngine(b"plan", te.TrtConfig(contexts=1, cuda_graphs=True), name="m")
    # every bucket is captured at start (each run once first, then recorded), none on the live path
    assert engine.runs == [1, 2, 4, 8] and cudart.launches == 0
    assert eng.captured() == [(("x", (b, FEAT)),) for b in (1, 2, 4, 8)]
    rng = np.random.default_rng(1)
    x5 = rng.standard_normal((5, FEAT)).astype(np.float32)
    np.testing.assert_allclose(eng.infer({"x": x5})["y"], 2 * x5 + 1, rtol=1e-6)  # replays the 8 bucket
    assert engine.runs[4:] == [8] and cudart.launches == 1
    x6 = rng.standard_normal((6, FEAT)).astype(np.float32)
    y6 = eng.infer({"x": x6})["y"]  # the same graph with new data
    assert y6.shape == (6, FEAT)
    np.testing.assert_allclose(y6, 2 * x6 + 1, rtol=1e-6)
    assert engine.runs[4:] == [8, 8] and cudart.launches == 2
    eng.infer({"x": x6[:1]})
    assert engine.runs[-1] == 1
    eng.close()


def test_fake_plan_graphs_are_keyed_by_full_shape(
    fake: tuple[Any, FakeCudart], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two spatial sizes at one batch bucket: each replays its own graph (keyed by batch alone, the second
    size replayed the first one's kernels and returned half its output unwritten)."""
    engine, cudart = fake
    engine.feats = (FEAT, 2 * FEAT)
    shapes = (("x", (1, FEAT)), ("x", (1, 2 * FEAT)))
    eng = te.TrtEngine(b"plan", te.TrtConfig(contexts=1, cuda_graphs=True, input_shapes=shapes), name="m")
    assert len(eng.captured()) == 2 * 4  # both sizes x buckets 1, 2, 4, 8
    warm = len(engine.runs)
    rng = np.random.default_rng(2)
    for f in (FEAT, 2 * FEAT, FEAT, 2 * FEAT):
        x = rng.standard_normal((3, f)).astype(np.float32)
        np.testing.assert_allclose(eng.infer({"x": x})["y"], 2 * x + 1, rtol=1e-6)
    assert engine.runs[warm:] == [4, 4, 4, 4] and cudart.launches == 4  # replays only

    # one host copy per input: staged straight into pinned memory, padded there
    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("an extra host copy")

    monkeypatch.setattr(np, "concatenate", refuse)
    monkeypatch.setattr(np, "ascontiguousarray", refuse)
    x = rng.standard_normal((8, 2 * FEAT)).astype(np.float32)[::2]  # strided: converted during the copy
    np.testing.assert_allclose(eng.infer({"x": x})["y"], 2 * x + 1, rtol=1e-6)
    eng.close()


def test_cuda_errors_become_engine_errors(fake: tuple[Any, FakeCudart]) -> None:
    _, cudart = fake
    with pytest.raises(EngineError, match="CUDA cudaMalloc failed: fake error"):
        te._check(cudart, (700,), "cudaMalloc")
    assert te._check(cudart, (0, 5), "x") == 5
    assert te.device_compute_capability(0) == (9, 0)
