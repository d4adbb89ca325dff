"""The one interface every inference backend implements.

Engines are blocking and are always called from a worker thread, never from the event loop (the gateway
runs them through an executor, like aiortc runs its codecs). A backend declares its batch range; callers may
pass any batch size — `run_batched` splits inputs larger than the engine's maximum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


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


def batch_size_of(inputs: dict[str, np.ndarray]) -> int:
    sizes = {int(v.shape[0]) for v in inputs.values()}
    if len(sizes) != 1:
        raise EngineError(f"inputs disagree on batch size: {sorted(sizes)}")
    return sizes.pop()


def checked_batch(name: str, closed: bool, batch: BatchRange, specs: Sequence[TensorSpec],
                  inputs: dict[str, np.ndarray]) -> int:
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
    n = batch_size_of(inputs)
    step = engine.batch.max
    parts: list[dict[str, np.ndarray]] = []
    for start in range(0, n, step):
        chunk = {k: v[start : start + step] for k, v in inputs.items()}
        m = min(step, n - start)
        if m < engine.batch.min:
            # Pad a short tail up to the engine's minimum with copies of its last item; results are cut.
            pad = engine.batch.min - m
            chunk = {k: np.concatenate([v, np.repeat(v[-1:], pad, axis=0)]) for k, v in chunk.items()}
        out = engine.infer(chunk)
        for k, v in out.items():
            if v.shape[0] < m:
                raise EngineError(f"{engine.name}: output {k} has batch {v.shape[0]}, expected {m}")
        parts.append({k: v[:m] for k, v in out.items()})
    if len(parts) == 1:
        return parts[0]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
