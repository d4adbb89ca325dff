"""The one interface every inference backend implements.

Engines are blocking and are always called from a worker thread, never from the event loop (the gateway
runs them through an executor, like aiortc runs its codecs). A backend declares its batch range; callers may
pass any batch size — `run_batched` splits inputs larger than the engine's maximum.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class TensorSpec:
    """Name, element type and shape of one engine input/output (None or a string = dynamic dim)."""

    name: str
    dtype: str
    shape: tuple[int | str | None, ...]


@dataclass(frozen=True)
class BatchRange:
    min: int = 1
    max: int = 1

    def __post_init__(self) -> None:
        if self.min < 1 or self.max < self.min:
            raise ValueError(f"invalid batch range {self.min}..{self.max}")


@runtime_checkable
class Engine(Protocol):
    """Named numpy inputs in, named numpy outputs out; dim 0 of every tensor is the batch."""

    @property
    def name(self) -> str: ...

    @property
    def inputs(self) -> tuple[TensorSpec, ...]: ...

    @property
    def outputs(self) -> tuple[TensorSpec, ...]: ...

    @property
    def batch(self) -> BatchRange: ...

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one batch (size within `batch`). Blocking; thread-safe unless the backend says otherwise."""
        ...

    def close(self) -> None:
        """Release the engine's resources. Idempotent."""
        ...


@runtime_checkable
class DeviceTensorEngine(Protocol):
    """An engine that lives on a torch device and also takes and returns tensors there (beside `infer`).

    Why: device image stages (the GFPGAN crops) make the model's input on the device; `infer` would download
    it and the engine upload it again, and the same for the output. Same names, dtypes and batch rules as
    `infer` (fp16 engines take and return float32 as `infer` does); every input must be on `device`. The
    outputs are the caller's to keep: fresh tensors, never views of the engine's static buffers or CUDA
    graph outputs, and on CUDA ordered before the caller's current stream's later work.
    """

    @property
    def device(self) -> str:
        """The torch device the engine runs on ("cpu", "cuda:0")."""
        ...

    @property
    def name(self) -> str: ...

    @property
    def batch(self) -> BatchRange: ...

    def infer_tensors(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """`infer` on tensors already on `device`; blocking and thread-safe as `infer`."""
        ...


def same_device(a: str, b: str) -> bool:
    """Whether two torch device strings name one device ("cuda", the current device, matches its "cuda:N")."""
    import torch

    da, db = torch.device(a), torch.device(b)
    if da.type != db.type:
        return False
    if da.type != "cuda" or da.index == db.index:
        return True
    current = torch.cuda.current_device()
    return (current if da.index is None else da.index) == (current if db.index is None else db.index)


class DescribedEngine:
    """What every backend exposes the same way: name, tensor specs and batch range, set in `__init__`."""

    _name: str
    _inputs: tuple[TensorSpec, ...]
    _outputs: tuple[TensorSpec, ...]
    _batch: BatchRange

    @property
    def name(self) -> str:
        return self._name

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._outputs

    @property
    def batch(self) -> BatchRange:
        return self._batch


class EngineError(RuntimeError):
    """An engine failed to load or to run a batch."""


def batch_size_of(inputs: Mapping[str, Any]) -> int:
    """Dim 0 shared by every input (numpy arrays or tensors)."""
    sizes = {int(v.shape[0]) for v in inputs.values()}
    if len(sizes) != 1:
        raise EngineError(f"inputs disagree on batch size: {sorted(sizes)}")
    return sizes.pop()


def checked_batch(
    name: str, closed: bool, batch: BatchRange, specs: Sequence[TensorSpec], inputs: Mapping[str, Any]
) -> int:
    """The batch size of `inputs` for an engine's `infer`, after the checks every backend makes first."""
    if closed:
        raise EngineError(f"{name}: engine is closed")
    n = batch_size_of(inputs)
    if not batch.min <= n <= batch.max:
        raise EngineError(f"{name}: batch {n} outside {batch.min}..{batch.max}")
    missing = {s.name for s in specs} - set(inputs)
    if missing:
        raise EngineError(f"{name}: missing inputs {sorted(missing)}")
    return n


def run_batched(engine: Engine, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run any batch size on `engine`, splitting into chunks of at most `engine.batch.max`.

    Checks that every output batch equals its input batch (one result per item, never a silent mismatch).
    """
    return _in_chunks(engine.name, engine.batch, engine.infer, inputs, np.concatenate)


def run_batched_tensors(
    engine: DeviceTensorEngine, inputs: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """`run_batched` for `infer_tensors`: the same split, padding and checks, on the engine's device."""
    import torch

    return _in_chunks(engine.name, engine.batch, engine.infer_tensors, inputs, torch.cat)


def _in_chunks(
    name: str,
    batch: BatchRange,
    infer: Callable[[dict[str, Any]], dict[str, Any]],
    inputs: Mapping[str, Any],
    concat: Callable[[list[Any]], Any],
) -> dict[str, Any]:
    """The split of `run_batched` over numpy arrays or tensors (`concat`: np.concatenate / torch.cat)."""
    n = batch_size_of(inputs)
    step = batch.max
    parts: list[dict[str, Any]] = []
    for start in range(0, n, step):
        chunk = {k: v[start : start + step] for k, v in inputs.items()}
        m = min(step, n - start)
        if m < batch.min:
            # Pad a short tail up to the engine's minimum with copies of its last item; results are cut.
            pad = batch.min - m
            chunk = {k: concat([v, *[v[-1:]] * pad]) for k, v in chunk.items()}
        out = infer(chunk)
        for k, v in out.items():
            if v.shape[0] < m:
                raise EngineError(f"{name}: output {k} has batch {v.shape[0]}, expected {m}")
        parts.append({k: v[:m] for k, v in out.items()})
    if len(parts) == 1:
        return parts[0]
    return {k: concat([p[k] for p in parts]) for k in parts[0]}
