"""PyTorch backend (`--engine torch`): the project's ONNX models converted by onnx2torch, on CPU or CUDA.

Why: a GPU machine may have PyTorch with CUDA and neither TensorRT nor onnxruntime-gpu, and the same code runs
on CPU torch, so CI tests the path. On CUDA: fp16 weights and activations, channels_last; each worker slot
owns a stream and, per input shape (`graph_keys`), static device buffers, pinned host staging and a CUDA graph
captured at warm-up for every batch bucket, so nothing is captured on the live path. Capture fails on any host
sync, so captured forwards are sync-free; models that compute shapes at run time are specialised per shape
first (`engines.onnx.specialise`). One host copy in, one out; batches padded to their bucket in pinned memory.
`infer_tensors` (`DeviceTensorEngine`) takes the same slots and graphs for tensors already on the device
(the device enhancer's crops): a device copy into the static inputs, the replay, and the outputs cloned on
the caller's stream, ordered by stream waits (no host sync), so the caller keeps them past the next replay.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engines.backends.graph_keys import GraphKey, graph_key, warmup_shapes
from engines.backends.onnxruntime_engine import batch_range_of
from engines.backends.tensorrt_engine import ContextPool
from engines.backends.trt_planning import BatchProfile, choose_bucket, graph_buckets
from engines.engine import DescribedEngine, EngineError, TensorSpec, checked_batch, same_device
from engines.onnx.specialise import has_shape_ops, inline_identities, specialise

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

TORCH_HINT = "the torch backend needs `pip install 'livefuse[torch]'` (PyTorch and onnx2torch)"


@dataclass(frozen=True)
class TorchConfig:
    device: str = "cpu"  # "cpu" | "cuda" | "cuda:N"
    fp16: bool = False  # half weights and activations (outputs are returned as float32)
    max_batch: int = 16
    workers: int = 2  # slots that run concurrently (one CUDA stream each)
    cuda_graphs: bool = True  # CUDA only: replay captured graphs (batches padded to their bucket)
    # full shapes of inputs with dynamic non-batch dims, captured at warm-up (a name may appear twice)
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    acquire_timeout_s: float = 30.0
    # CPU intra-op threads; 0 = torch's default. torch keeps ONE pool per process, so this sets it for the
    # process (as the gateway's --intra-op-threads means it): with one worker per core, 1 avoids the
    # oversubscription that makes each call many times slower on a loaded machine.
    threads: int = 0


def import_torch() -> tuple[Any, Any]:
    try:
        import torch
    except ImportError:
        raise EngineError(TORCH_HINT) from None
    try:
        import onnx2torch
    except ImportError as e:
        if e.name != "torchvision":
            raise EngineError(TORCH_HINT) from None
        onnx2torch = _onnx2torch_without_torchvision()
    return torch, onnx2torch


def _onnx2torch_without_torchvision() -> Any:
    """Import onnx2torch where torchvision is absent (the CPU CI: PyPI's torchvision is a CUDA build that
    cannot load beside CPU torch). onnx2torch imports it only for NonMaxSuppression and RoiAlign, which no
    model here uses; during the import a module stands in whose functions raise a one-line error if a model
    ever reaches them. It is removed from `sys.modules` afterwards (onnx2torch keeps its own reference)."""
    import sys
    import types

    def missing(name: str) -> Any:
        def fail(*_args: Any, **_kwargs: Any) -> Any:
            raise EngineError(f"ONNX op needing torchvision.ops.{name}: `pip install torchvision`")

        return fail

    ops = types.ModuleType("torchvision.ops")
    ops.__getattr__ = missing  # type: ignore[method-assign]
    tv = types.ModuleType("torchvision")
    tv.ops = ops  # type: ignore[attr-defined]
    sys.modules["torchvision"], sys.modules["torchvision.ops"] = tv, ops
    try:
        import onnx2torch
    except ImportError:
        raise EngineError(TORCH_HINT) from None
    finally:
        del sys.modules["torchvision"], sys.modules["torchvision.ops"]
    return onnx2torch


def onnx_output_specs(proto: Any) -> tuple[TensorSpec, ...]:
    import onnx

    out: list[TensorSpec] = []
    for v in proto.graph.output:
        dims = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in v.type.tensor_type.shape.dim
        )
        out.append(TensorSpec(v.name, onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type), dims))
    return tuple(out)


def share_weights(base: Any, other: Any) -> int:
    """Point `other`'s parameters and buffers at `base`'s where names and shapes agree (a specialised copy
    converted from the same graph); returns how many tensors are now shared."""
    own = dict(base.named_parameters())
    own.update(dict(base.named_buffers()))
    shared = 0
    for mod_name, module in other.named_modules():
        for store in (module._parameters, module._buffers):
            for key, tensor in list(store.items()):
                ref = own.get(f"{mod_name}.{key}" if mod_name else key)
                if (
                    tensor is not None
                    and ref is not None
                    and ref.shape == tensor.shape
                    and ref.dtype == tensor.dtype
                ):
                    store[key] = ref
                    shared += 1
    return shared


def to_device_keeping_indices(module: Any, device: Any) -> Any:
    """Move the module's weights (parameters, floating buffers) to `device` and leave its integer buffers
    (reshape targets, pads, resize sizes, axes: what onnx2torch's ops read back with `.tolist()` or iterate)
    on the CPU: on CUDA each read-back is a host synchronisation, and inside a graph capture an error."""
    import torch

    for sub in module.modules():
        for key, param in list(sub._parameters.items()):
            if param is not None:
                sub._parameters[key] = torch.nn.Parameter(param.detach().to(device), requires_grad=False)
        for key, tensor in list(sub._buffers.items()):
            if tensor is not None and (tensor.is_floating_point() or tensor.is_complex()):
                sub._buffers[key] = tensor.to(device)
    return module


@dataclass
class _Graph:
    """One captured forward on one slot: static device inputs/outputs, pinned host staging, the graph."""

    graph: Any
    inputs: dict[str, Any]
    outputs: list[Any]
    host_in: dict[str, Any]
    host_out: list[Any]


class _Slot:
    def __init__(self, index: int, profile: BatchProfile, stream: Any, pool: Any) -> None:
        self.index = index
        self.profile = profile
        self.stream = stream
        self.pool = pool  # one CUDA graph memory pool per slot: its graphs never run at once
        self.graphs: dict[GraphKey, _Graph] = {}


class TorchEngine(DescribedEngine):
    """Engine protocol over an onnx2torch module. Thread-safe: concurrent calls use different slots."""

    def __init__(
        self, model: Path | bytes, config: TorchConfig = TorchConfig(), name: str | None = None
    ) -> None:
        import onnx

        torch, onnx2torch = import_torch()
        self._torch, self._onnx2torch = torch, onnx2torch
        self._name = name or (model.stem if isinstance(model, Path) else "onnx")
        if isinstance(model, Path) and not model.is_file():
            raise EngineError(f"{self._name}: model file not found: {model}")
        self._config = config
        self._device = torch.device(config.device)
        self._cuda = self._device.type == "cuda"
        if self._cuda and not torch.cuda.is_available():
            raise EngineError(
                f"{self._name}: torch {torch.__version__} sees no CUDA device "
                f"(asked for {config.device}); a CPU run here would be silently slow"
            )
        if config.threads > 0 and torch.get_num_threads() != config.threads:
            torch.set_num_threads(config.threads)
        if self._device.type not in ("cpu", "cuda"):
            raise EngineError(f"{self._name}: torch device must be cpu or cuda[:N], got {config.device!r}")
        proto = onnx.load_model_from_string(model.read_bytes() if isinstance(model, Path) else model)
        inits = {i.name for i in proto.graph.initializer}
        self._inputs = tuple(
            TensorSpec(
                v.name,
                onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type),
                tuple(
                    d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                    for d in v.type.tensor_type.shape.dim
                ),
            )
            for v in proto.graph.input
            if v.name not in inits
        )
        self._outputs = onnx_output_specs(proto)
        self._batch = batch_range_of(self._inputs, config.max_batch)
        self._proto = proto = inline_identities(proto)
        self._per_shape = has_shape_ops(proto)
        self._lock = threading.Lock()
        self._modules: dict[GraphKey, Any] = {}
        self._closed = False
        try:
            self._base = self._convert(proto)
        except Exception as e:
            raise EngineError(f"{self._name}: onnx2torch cannot convert the model: {e}") from None
        self._use_graphs = self._cuda and config.cuda_graphs
        profile = BatchProfile(self._batch.min, self._batch.min, self._batch.max)
        self._buckets = graph_buckets(profile) if self._use_graphs else ()
        slots = []
        for i in range(max(1, config.workers)):
            stream = torch.cuda.Stream(device=self._device) if self._cuda else None
            pool = torch.cuda.graph_pool_handle() if self._use_graphs else None
            slots.append(_Slot(i, profile, stream, pool))
        self._pool = ContextPool(slots, config.acquire_timeout_s)
        self._slots = slots
        self.warm_up()

    # -- conversion ---------------------------------------------------------------------------------------
    def _convert(self, proto: Any) -> Any:
        torch = self._torch
        module = self._onnx2torch.convert(proto).eval()
        module = to_device_keeping_indices(module, self._device)
        if self._config.fp16:
            module = module.half()
        if self._cuda:
            module = module.to(memory_format=torch.channels_last)
        for p in module.parameters():
            p.requires_grad_(False)
        return module

    def _module_for(self, shapes: dict[str, tuple[int, ...]]) -> Any:
        if not self._per_shape:
            return self._base
        key = graph_key(shapes, next(iter(shapes.values()))[0])
        with self._lock:
            module = self._modules.get(key)
        if module is not None:
            return module
        try:
            module = self._convert(specialise(self._proto, shapes))
        except Exception as e:
            raise EngineError(f"{self._name}: cannot specialise the model to {dict(shapes)}: {e}") from None
        share_weights(self._base, module)
        with self._lock:
            return self._modules.setdefault(key, module)

    # -- running ------------------------------------------------------------------------------------------
    @property
    def device(self) -> str:
        return str(self._device)

    @property
    def workers(self) -> int:
        return self._pool.size

    def captured(self) -> list[GraphKey]:
        """Graph keys captured on every slot (what replays without a capture)."""
        keys = [set(s.graphs) for s in self._slots]
        return sorted(set.intersection(*keys)) if keys else []

    def _forward(self, module: Any, tensors: Sequence[Any]) -> list[Any]:
        torch = self._torch
        xs = []
        for t in tensors:
            if self._config.fp16 and t.is_floating_point():
                t = t.half()
            if self._cuda and t.dim() == 4:
                t = t.contiguous(memory_format=torch.channels_last)
            xs.append(t)
        out = module(*xs)
        outs = list(out) if isinstance(out, list | tuple) else [out]
        return [o.float() if o.is_floating_point() else o for o in outs]

    def warm_up(self) -> None:
        """Convert (and on CUDA capture) every configured shape at every bucket on every slot."""
        shape_sets = warmup_shapes(self._inputs, self._config.input_shapes)
        sizes = self._buckets or (self._batch.min,)
        for shapes in shape_sets:
            for b in sizes:
                full = {k: (b, *v[1:]) for k, v in shapes.items()}
                zeros = {
                    s.name: np.zeros(full[s.name], dtype=np.dtype(_np_dtype(s.dtype))) for s in self._inputs
                }
                for slot in self._slots:
                    self._run(slot, zeros, b)

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        n = checked_batch(self._name, self._closed, self._batch, self._inputs, inputs)
        with self._pool.take(n) as slot:
            return self._run(slot, inputs, n)

    def infer_tensors(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """`infer` on tensors already on this engine's device (`DeviceTensorEngine`): float32 in and out as
        `infer` (fp16 is inside); outputs are fresh tensors the caller keeps. On CUDA the slot's stream waits
        for the caller's current stream before reading the inputs, and the outputs are copied out of the
        static buffers on the caller's stream after the slot's work, so no host sync and no later replay on
        the slot can touch them."""
        n = checked_batch(self._name, self._closed, self._batch, self._inputs, inputs)
        for k, v in inputs.items():
            if not same_device(str(v.device), self.device):
                raise EngineError(f"{self._name}: input {k} is on {v.device}, the engine on {self._device}")
        with self._pool.take(n) as slot:
            return self._run_tensors(slot, inputs, n)

    def _run(self, slot: _Slot, inputs: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
        torch = self._torch
        if not self._cuda:
            tensors = {
                s.name: torch.from_numpy(np.require(inputs[s.name], requirements=("C", "W")))
                for s in self._inputs
            }
            return {k: o.numpy() for k, o in self._run_cpu(tensors).items()}

        def stage(graph: _Graph, bucket: int) -> None:  # through the pinned buffers: one host copy in
            for spec in self._inputs:
                host = graph.host_in[spec.name].numpy()
                host[:n] = inputs[spec.name]
                if bucket > n:  # pad with copies of the last item; their results are cut
                    host[n:] = host[n - 1 : n]
                graph.inputs[spec.name].copy_(graph.host_in[spec.name], non_blocking=True)

        shapes = {s.name: tuple(inputs[s.name].shape) for s in self._inputs}
        with torch.cuda.device(self._device):
            graph, outs = self._run_slot(slot, shapes, n, stage)
            with torch.cuda.stream(slot.stream):
                host_out = (
                    graph.host_out
                    if graph.graph is not None
                    else [torch.empty(o.shape, dtype=o.dtype, pin_memory=True) for o in outs]
                )
                for h, o in zip(host_out, outs, strict=True):
                    h.copy_(o, non_blocking=True)
            slot.stream.synchronize()
        return {spec.name: h[:n].numpy().copy() for spec, h in zip(self._outputs, host_out, strict=True)}

    def _run_tensors(self, slot: _Slot, inputs: dict[str, Any], n: int) -> dict[str, Any]:
        torch = self._torch
        if not self._cuda:
            return self._run_cpu({s.name: inputs[s.name] for s in self._inputs})
        caller = torch.cuda.current_stream(self._device)

        def stage(graph: _Graph, bucket: int) -> None:  # device to device, no host copy
            slot.stream.wait_stream(caller)
            for spec in self._inputs:
                x, dst = inputs[spec.name], graph.inputs[spec.name]
                dst[:n].copy_(x)
                if bucket > n:  # pad with copies of the last item; their results are cut
                    dst[n:].copy_(x[n - 1 : n].expand_as(dst[n:]))

        shapes = {s.name: tuple(inputs[s.name].shape) for s in self._inputs}
        with torch.cuda.device(self._device):
            _, outs = self._run_slot(slot, shapes, n, stage)
            caller.wait_stream(slot.stream)
            with torch.inference_mode():
                kept = [o[:n].clone() for o in outs]  # on the caller's stream: its memory is the caller's
            slot.stream.wait_stream(caller)  # the slot's next replay rewrites `outs` only after the copies
        return {spec.name: o for spec, o in zip(self._outputs, kept, strict=True)}

    def _run_cpu(self, tensors: dict[str, Any]) -> dict[str, Any]:
        """One forward on CPU torch (no slots' buffers there: the module's outputs are fresh)."""
        module = self._module_for({k: tuple(v.shape) for k, v in tensors.items()})
        with self._torch.inference_mode():
            outs = self._forward(module, [tensors[s.name] for s in self._inputs])
        return {spec.name: o for spec, o in zip(self._outputs, outs, strict=True)}

    def _run_slot(
        self, slot: _Slot, shapes: dict[str, tuple[int, ...]], n: int, stage: Callable[[_Graph, int], None]
    ) -> tuple[_Graph, list[Any]]:
        """The CUDA path both `infer` and `infer_tensors` take: the slot's static buffers (and graph) for
        these shapes at n's bucket, `stage(graph, bucket)` filling `graph.inputs` on the slot's stream, then
        the replay (or, graphs off, the forward). Returns the graph and its device outputs (bucket rows),
        queued on the slot's stream. Inside `torch.cuda.device(self._device)`."""
        torch = self._torch
        bucket = choose_bucket(self._buckets, n) if self._use_graphs else n
        full = {s.name: (bucket, *shapes[s.name][1:]) for s in self._inputs}
        key = graph_key(full, bucket)
        graph = slot.graphs.get(key)
        if graph is None:
            if self._use_graphs and slot.graphs:
                log.info("%s: capturing a CUDA graph on the live path for %s", self._name, key)
            graph = self._prepare(slot, full)
            if self._use_graphs:
                slot.graphs[key] = graph
        with torch.cuda.stream(slot.stream):
            stage(graph, bucket)
            if graph.graph is not None:
                graph.graph.replay()
                return graph, graph.outputs
            args = [graph.inputs[s.name] for s in self._inputs]
            with torch.inference_mode():
                return graph, self._forward(self._module_for(full), args)

    def _prepare(self, slot: _Slot, shapes: dict[str, tuple[int, ...]]) -> _Graph:
        """Static buffers for one shape set and, with graphs on, its captured forward (run twice first, on the
        slot's stream, as PyTorch's graph docs ask: lazy initialisation must not be captured)."""
        torch = self._torch
        module = self._module_for(shapes)
        dev_in = {
            s.name: torch.zeros(shapes[s.name], dtype=_torch_dtype(torch, s.dtype), device=self._device)
            for s in self._inputs
        }
        host_in = {k: torch.zeros(v.shape, dtype=v.dtype, pin_memory=True) for k, v in dev_in.items()}
        if not self._use_graphs:
            return _Graph(None, dev_in, [], host_in, [])
        args = [dev_in[s.name] for s in self._inputs]
        slot.stream.wait_stream(torch.cuda.current_stream(self._device))
        with torch.cuda.stream(slot.stream), torch.inference_mode():
            for _ in range(2):
                self._forward(module, args)
        slot.stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.inference_mode(), torch.cuda.graph(graph, pool=slot.pool, stream=slot.stream):
                outs = self._forward(module, args)
        except Exception as e:
            raise EngineError(
                f"{self._name}: CUDA graph capture failed for {shapes} (a host sync inside the forward?): {e}"
            ) from None
        host_out = [torch.empty(o.shape, dtype=o.dtype, pin_memory=True) for o in outs]
        return _Graph(graph, dev_in, outs, host_in, host_out)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for slot in self._pool.drain(timeout_s=self._config.acquire_timeout_s):
            slot.graphs.clear()
        self._modules.clear()
        self._base = None
        if self._cuda:
            self._torch.cuda.empty_cache()


_NP_DTYPES = {
    "FLOAT": "float32",
    "FLOAT16": "float16",
    "DOUBLE": "float64",
    "INT64": "int64",
    "INT32": "int32",
    "UINT8": "uint8",
    "INT8": "int8",
    "BOOL": "bool",
}


def _np_dtype(onnx_name: str) -> str:
    if onnx_name not in _NP_DTYPES:
        raise EngineError(f"unsupported input type {onnx_name}")
    return _NP_DTYPES[onnx_name]


def _torch_dtype(torch: Any, onnx_name: str) -> Any:
    return getattr(torch, _np_dtype(onnx_name))
