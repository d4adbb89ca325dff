"""Native TensorRT 10 backend: a serialized plan, N execution contexts, one CUDA stream each.

Why native and not only ORT's TensorRT provider: batches from several worker threads run concurrently on the
GPU (ORT serializes one session's TensorRT subgraph), buffers are allocated once for the profile's largest
shapes (`infer` never allocates), and a CUDA graph per batch bucket saves per-kernel launch cost.
TensorRT and cuda-python are imported lazily (missing: one EngineError line with the install hint), every
cudart call's error is checked, and GPU-free decisions live in `trt_planning`. Each concurrently used context
needs its own optimization profile, so plans carry `--profiles` copies of the batch profile, context i uses
profile i, and a `ContextPool` hands each `infer` call a free context.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engines.backends.graph_keys import GraphKey, graph_key, warmup_shapes
from engines.backends.trt_planning import (
    BatchProfile,
    TensorLayout,
    assign_profiles,
    choose_bucket,
    dtype_of,
    graph_buckets,
    nbytes,
    plan_buffers,
)
from engines.engine import BatchRange, DescribedEngine, EngineError, TensorSpec, checked_batch

GPU_HINT = "TensorRT backend needs an NVIDIA GPU and `pip install 'livefuse[gpu]'`"


@dataclass(frozen=True)
class TrtConfig:
    device_id: int = 0
    contexts: int = 2  # upper bound; the plan's profile count caps it
    cuda_graphs: bool = False  # one CUDA graph per batch bucket and input shape (padded batches)
    acquire_timeout_s: float = 30.0
    # full shapes of inputs with dynamic non-batch dims, captured at start (a name may repeat)
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()


def _import_gpu() -> tuple[Any, Any]:
    try:
        import tensorrt as trt
        from cuda.bindings import runtime as cudart
    except ImportError:
        raise EngineError(GPU_HINT) from None
    return trt, cudart


def _check(cudart: Any, result: Any, what: str) -> Any:
    """cuda-python returns (err, *values); raise on any error, return the value(s)."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != cudart.cudaError_t.cudaSuccess:
        _, msg = cudart.cudaGetErrorString(err)
        text = msg.decode() if isinstance(msg, bytes) else str(msg)
        raise EngineError(f"CUDA {what} failed: {text} ({err})")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def device_compute_capability(device_id: int = 0) -> tuple[int, int]:
    """(major, minor) of a CUDA device: plans are tied to it, so it is part of the plan file name."""
    _, cudart = _import_gpu()
    major = _check(
        cudart,
        cudart.cudaDeviceGetAttribute(cudart.cudaDeviceAttr.cudaDevAttrComputeCapabilityMajor, device_id),
        "cudaDeviceGetAttribute",
    )
    minor = _check(
        cudart,
        cudart.cudaDeviceGetAttribute(cudart.cudaDeviceAttr.cudaDevAttrComputeCapabilityMinor, device_id),
        "cudaDeviceGetAttribute",
    )
    return int(major), int(minor)


class ContextPool:
    """Free-list of execution-context slots; `take(n)` waits for a free slot whose profile holds batch n.

    Kept GPU-free (slots are any objects with a `profile`) so the hand-out logic is unit-tested on CPU.
    """

    def __init__(self, slots: Sequence[Any], timeout_s: float = 30.0) -> None:
        self._slots = list(slots)
        self._free = list(slots)
        self._cond = threading.Condition()
        self._timeout = timeout_s
        self._closed = False

    @property
    def size(self) -> int:
        return len(self._slots)

    @contextmanager
    def take(self, n: int) -> Iterator[Any]:
        if not any(s.profile.contains(n) for s in self._slots):
            raise EngineError(f"batch {n} fits no execution context's profile")
        with self._cond:

            def ready() -> bool:
                return self._closed or any(s.profile.contains(n) for s in self._free)

            if not self._cond.wait_for(ready, timeout=self._timeout):
                raise EngineError(f"no free execution context within {self._timeout:.0f} s")
            if self._closed:
                raise EngineError("engine is closed")
            slot = next(s for s in self._free if s.profile.contains(n))
            self._free.remove(slot)
        try:
            yield slot
        finally:
            with self._cond:
                self._free.append(slot)
                self._cond.notify_all()

    @property
    def slots(self) -> list[Any]:
        return list(self._slots)

    def all_idle(self) -> list[Any]:
        """Every slot, when none is in use (at start, before any `take`)."""
        with self._cond:
            if len(self._free) != len(self._slots):
                raise EngineError("contexts are in use")
            return list(self._slots)

    def drain(self, timeout_s: float) -> list[Any]:
        """Close the pool, wait for slots in use to come back, and return every slot (for freeing)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: len(self._free) == len(self._slots), timeout=timeout_s)
            return list(self._slots)


def _pinned_view(ptr: int, size: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr))


class _Slot:
    """One execution context with its stream, profile and preallocated buffers."""

    def __init__(self, engine: TrtEngine, index: int, profile_index: int, profile: BatchProfile) -> None:
        cudart = engine._cudart
        self.profile = profile
        self.index = index
        self.graphs: dict[GraphKey, Any] = {}
        self.device: dict[str, int] = {}
        self.host: dict[str, int] = {}
        self.host_views: dict[str, np.ndarray] = {}
        self.stream = _check(
            cudart, cudart.cudaStreamCreateWithFlags(cudart.cudaStreamNonBlocking), "cudaStreamCreate"
        )
        self.context = engine._engine.create_execution_context()
        if self.context is None:
            raise EngineError(f"{engine.name}: cannot create execution context {index}")
        if not self.context.set_optimization_profile_async(profile_index, int(self.stream)):
            raise EngineError(f"{engine.name}: cannot select optimization profile {profile_index}")
        _check(cudart, cudart.cudaStreamSynchronize(self.stream), "cudaStreamSynchronize")
        # Set every input to its max shape to learn the outputs' max shapes, then size buffers once.
        max_shapes: dict[str, tuple[int, ...]] = {}
        for t in engine._layouts:
            if t.is_input:
                shape = tuple(engine._engine.get_tensor_profile_shape(t.name, profile_index)[2])
                self.context.set_input_shape(t.name, shape)
                max_shapes[t.name] = shape
        for t in engine._layouts:
            if not t.is_input:
                shape = tuple(self.context.get_tensor_shape(t.name))
                if any(d < 0 for d in shape):
                    raise EngineError(f"{engine.name}: output {t.name} has a data-dependent shape {shape}")
                max_shapes[t.name] = shape
        plan = plan_buffers(engine._layouts, profile.max, max_shapes)
        for name, size in plan.sizes.items():
            self.device[name] = int(_check(cudart, cudart.cudaMalloc(max(size, 1)), "cudaMalloc"))
            self.host[name] = int(_check(cudart, cudart.cudaMallocHost(max(size, 1)), "cudaMallocHost"))
            self.host_views[name] = _pinned_view(self.host[name], max(size, 1))
            if not self.context.set_tensor_address(name, self.device[name]):
                raise EngineError(f"{engine.name}: set_tensor_address({name}) failed")

    def free(self, cudart: Any) -> None:
        for exec_graph in self.graphs.values():
            cudart.cudaGraphExecDestroy(exec_graph)
        self.graphs.clear()
        for ptr in self.device.values():
            cudart.cudaFree(ptr)
        for ptr in self.host.values():
            cudart.cudaFreeHost(ptr)
        self.device.clear()
        self.host.clear()
        self.host_views.clear()
        self.context = None
        cudart.cudaStreamDestroy(self.stream)


class TrtEngine(DescribedEngine):
    """Engine protocol over a TensorRT plan. Thread-safe: concurrent `infer` calls use different contexts."""

    def __init__(self, plan: Path | bytes, config: TrtConfig = TrtConfig(), name: str | None = None) -> None:
        self._name = name or (plan.name.split(".")[0] if isinstance(plan, Path) else "trt")
        trt, cudart = _import_gpu()
        self._trt, self._cudart = trt, cudart
        self._config = config
        self._lock = threading.Lock()
        self._closed = False
        data = plan.read_bytes() if isinstance(plan, Path) else plan
        _check(cudart, cudart.cudaSetDevice(config.device_id), "cudaSetDevice")
        self._logger = trt.Logger(trt.Logger.WARNING)
        self._runtime = trt.Runtime(self._logger)
        self._engine = self._runtime.deserialize_cuda_engine(data)
        if self._engine is None:
            raise EngineError(
                f"{self._name}: cannot deserialize the plan (built by another TensorRT version "
                f"or GPU? rebuild with scripts/build_engines.py)"
            )
        layouts: list[TensorLayout] = []
        for i in range(self._engine.num_io_tensors):
            tname = self._engine.get_tensor_name(i)
            is_input = self._engine.get_tensor_mode(tname) == trt.TensorIOMode.INPUT
            layouts.append(
                TensorLayout(
                    tname,
                    str(self._engine.get_tensor_dtype(tname)),
                    tuple(self._engine.get_tensor_shape(tname)),
                    is_input,
                )
            )
        self._layouts = tuple(layouts)
        self._inputs = tuple(
            TensorSpec(t.name, dtype_of(t.dtype), _spec_shape(t.shape)) for t in layouts if t.is_input
        )
        self._outputs = tuple(
            TensorSpec(t.name, dtype_of(t.dtype), _spec_shape(t.shape)) for t in layouts if not t.is_input
        )
        first = self._inputs[0].name
        profiles = []
        for p in range(self._engine.num_optimization_profiles):
            mn, op, mx = (tuple(s) for s in self._engine.get_tensor_profile_shape(first, p))
            profiles.append(BatchProfile(mn[0], op[0], mx[0]))
        slots: list[_Slot] = []
        try:
            for i, p in enumerate(assign_profiles(config.contexts, len(profiles))):
                slots.append(_Slot(self, i, p, profiles[p]))
        except Exception:
            for s in slots:
                s.free(cudart)
            raise
        self._pool = ContextPool(slots, config.acquire_timeout_s)
        lo = max(s.profile.min for s in slots)
        hi = min(s.profile.max for s in slots)
        self._batch = BatchRange(lo, hi)
        self._buckets = {s.index: graph_buckets(s.profile) for s in slots}
        if config.cuda_graphs:
            self._capture_all()

    def _capture_all(self) -> None:
        """Capture every bucket's graph for every configured input shape on every context, at start: a
        capture on the live path stalls that batch (and every frame in it) for the capture's time."""
        for shapes in warmup_shapes(self._inputs, self._config.input_shapes):
            for slot in self._pool.all_idle():
                for bucket in self._buckets[slot.index]:
                    zeros = {
                        s.name: np.zeros((bucket, *shapes[s.name][1:]), dtype=np.dtype(s.dtype))
                        for s in self._inputs
                    }
                    self._run(slot, zeros, bucket, bucket)

    def captured(self) -> list[GraphKey]:
        """Graph keys captured on every context (what replays without a capture)."""
        keys = [set(s.graphs) for s in self._pool.slots]
        return sorted(set.intersection(*keys)) if keys else []

    @property
    def contexts(self) -> int:
        return self._pool.size

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        n = checked_batch(self._name, self._closed, self._batch, self._inputs, inputs)
        cudart = self._cudart
        _check(cudart, cudart.cudaSetDevice(self._config.device_id), "cudaSetDevice")
        with self._pool.take(n) as slot:
            run_n = choose_bucket(self._buckets[slot.index], n) if self._config.cuda_graphs else n
            return self._run(slot, inputs, n, run_n)

    def _run(self, slot: _Slot, inputs: dict[str, np.ndarray], n: int, run_n: int) -> dict[str, np.ndarray]:
        cudart = self._cudart
        h2d = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
        d2h = cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
        shapes: dict[str, tuple[int, ...]] = {}
        for spec in self._inputs:
            src = inputs[spec.name]
            dtype = np.dtype(spec.dtype)
            shape = (run_n, *src.shape[1:])
            size = nbytes(shape, dtype.itemsize)
            view = slot.host_views[spec.name]
            if size > view.size:
                raise EngineError(f"{self._name}: input {spec.name} {shape} exceeds the profile's max shape")
            # one host copy, straight into pinned memory (dtype and layout converted on the way); a batch
            # padded to its bucket repeats its last item there (the extra results are cut)
            staged = view[:size].view(dtype).reshape(shape)
            staged[:n] = src
            if run_n > n:
                staged[n:] = src[n - 1 : n]
            if not slot.context.set_input_shape(spec.name, shape):
                raise EngineError(f"{self._name}: shape {shape} rejected for input {spec.name}")
            shapes[spec.name] = shape
            _check(
                cudart,
                cudart.cudaMemcpyAsync(slot.device[spec.name], slot.host[spec.name], size, h2d, slot.stream),
                "cudaMemcpyAsync H2D",
            )
        out_shapes = {s.name: tuple(slot.context.get_tensor_shape(s.name)) for s in self._outputs}
        if self._config.cuda_graphs:
            self._launch_graph(slot, graph_key(shapes, run_n))
        elif not slot.context.execute_async_v3(int(slot.stream)):
            raise EngineError(f"{self._name}: execute_async_v3 failed")
        for spec in self._outputs:
            size = nbytes(out_shapes[spec.name], np.dtype(spec.dtype).itemsize)
            _check(
                cudart,
                cudart.cudaMemcpyAsync(slot.host[spec.name], slot.device[spec.name], size, d2h, slot.stream),
                "cudaMemcpyAsync D2H",
            )
        _check(cudart, cudart.cudaStreamSynchronize(slot.stream), "cudaStreamSynchronize")
        result: dict[str, np.ndarray] = {}
        for spec in self._outputs:
            shape = out_shapes[spec.name]
            size = nbytes(shape, np.dtype(spec.dtype).itemsize)
            full = slot.host_views[spec.name][:size].view(np.dtype(spec.dtype)).reshape(shape)
            result[spec.name] = full[:n].copy()
        return result

    def _launch_graph(self, slot: _Slot, key: GraphKey) -> None:
        """Replay the graph of these exact input shapes; the first time, run once (TensorRT's lazy setup must
        not be captured) and capture. Input shapes are set before, so the captured kernels match the key: a
        graph keyed by batch alone would replay another spatial size's kernels on this one's buffers."""
        cudart = self._cudart
        exec_graph = slot.graphs.get(key)
        if exec_graph is None:
            if not slot.context.execute_async_v3(int(slot.stream)):
                raise EngineError(f"{self._name}: execute_async_v3 failed")
            mode = cudart.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal
            _check(cudart, cudart.cudaStreamBeginCapture(slot.stream, mode), "cudaStreamBeginCapture")
            ok = slot.context.execute_async_v3(int(slot.stream))
            graph = _check(cudart, cudart.cudaStreamEndCapture(slot.stream), "cudaStreamEndCapture")
            if not ok:
                cudart.cudaGraphDestroy(graph)
                raise EngineError(f"{self._name}: execute_async_v3 failed during graph capture")
            exec_graph = _check(cudart, cudart.cudaGraphInstantiate(graph, 0), "cudaGraphInstantiate")
            cudart.cudaGraphDestroy(graph)
            slot.graphs[key] = exec_graph
            return  # the warm-up run already produced this batch's outputs
        _check(cudart, cudart.cudaGraphLaunch(exec_graph, slot.stream), "cudaGraphLaunch")

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        slots = self._pool.drain(timeout_s=self._config.acquire_timeout_s)
        for slot in slots:
            slot.free(self._cudart)
        self._engine = None
        self._runtime = None


def _spec_shape(shape: Sequence[int]) -> tuple[int | str | None, ...]:
    return tuple(None if d < 0 else d for d in shape)
