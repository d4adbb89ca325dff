"""Every TensorRT decision that needs no GPU: plan naming, profile and bucket choice, buffer sizes.

Why a separate module: the native backend (`tensorrt_engine`) and `scripts/build_engines.py` only run where
an NVIDIA GPU and TensorRT exist, but the choices they make — which plan file fits this machine, which
optimization profile and CUDA-graph bucket serve a batch of 5, how many bytes a pinned buffer needs — are
plain arithmetic. Keeping them here lets them be tested on any machine and keeps the GPU code a thin executor.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PRECISIONS = ("fp32", "fp16")

# TensorRT DataType names (str(trt.DataType.X) ends with the name) -> numpy dtype name and item size.
_TRT_DTYPES: dict[str, tuple[str, int]] = {
    "FLOAT": ("float32", 4),
    "HALF": ("float16", 2),
    "BF16": ("bfloat16", 2),
    "INT8": ("int8", 1),
    "UINT8": ("uint8", 1),
    "INT32": ("int32", 4),
    "INT64": ("int64", 8),
    "BOOL": ("bool", 1),
}


@dataclass(frozen=True)
class BatchProfile:
    """One TensorRT optimization profile's batch range (dim 0 of every input)."""

    min: int
    opt: int
    max: int

    def __post_init__(self) -> None:
        if not 1 <= self.min <= self.opt <= self.max:
            raise ValueError(
                f"invalid batch profile {self.min}/{self.opt}/{self.max} (need 1 <= min <= opt <= max)"
            )

    def contains(self, n: int) -> bool:
        return self.min <= n <= self.max


@dataclass(frozen=True)
class PlanKey:
    """What a serialized plan is tied to: TensorRT version, GPU architecture, precision and batch range."""

    model: str
    trt_version: str
    compute_capability: tuple[int, int]
    precision: str
    min_batch: int
    max_batch: int

    def filename(self) -> str:
        return plan_filename(self)


def plan_filename(key: PlanKey) -> str:
    """`<model>.trt<version>.sm<cc>.<precision>.b<min>-<max>.plan` — a plan only runs on the TRT version and
    GPU architecture that built it, so both are in the name and a mismatched plan is never picked up."""
    if key.precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {key.precision!r}")
    if "." in key.model or "/" in key.model:
        raise ValueError(f"model name {key.model!r} must not contain '.' or '/'")
    major, minor = key.compute_capability
    return (
        f"{key.model}.trt{key.trt_version}.sm{major}{minor}.{key.precision}."
        f"b{key.min_batch}-{key.max_batch}.plan"
    )


_PLAN_RE = re.compile(
    r"^(?P<model>[^./]+)\.trt(?P<ver>\d+(?:\.\d+)*)\.sm(?P<cc>\d{2,3})\.(?P<prec>fp32|fp16)"
    r"\.b(?P<min>\d+)-(?P<max>\d+)\.plan$"
)


def parse_plan_filename(name: str) -> PlanKey | None:
    m = _PLAN_RE.match(name)
    if not m:
        return None
    cc = m.group("cc")
    return PlanKey(
        m.group("model"),
        m.group("ver"),
        (int(cc[:-1]), int(cc[-1])),
        m.group("prec"),
        int(m.group("min")),
        int(m.group("max")),
    )


def plan_model_name(path: Path) -> str:
    """The model part of a plan name: the file name up to its first dot ('inswapper_128.dyn.onnx' ->
    'inswapper_128'), so a batch-dynamic copy maps to the same plans as its source."""
    return path.name.split(".")[0]


def trt_version_tag(version: str, parts: int = 2) -> str:
    """'10.13.2.6' -> '10.13': plans are portable across patch releases of one minor version."""
    return ".".join(version.split(".")[:parts])


def select_plan(
    names: Iterable[str],
    model: str,
    trt_version: str,
    compute_capability: tuple[int, int],
    precision: str | None = None,
) -> str | None:
    """The plan file for this model, TRT version and GPU; prefers the requested precision, then the widest
    batch range (so cross-session batches fit), then the name (a stable choice)."""
    candidates: list[tuple[int, int, str]] = []
    for name in names:
        key = parse_plan_filename(Path(name).name)
        if key is None or key.model != model or key.compute_capability != compute_capability:
            continue
        if trt_version_tag(key.trt_version) != trt_version_tag(trt_version):
            continue
        if precision is not None and key.precision != precision:
            continue
        candidates.append((-(key.max_batch - key.min_batch), key.min_batch, name))
    if not candidates:
        return None
    return sorted(candidates)[0][2]


def assign_profiles(contexts: int, profiles: int) -> list[int]:
    """Profile index for each execution context. TensorRT requires contexts in concurrent use to own distinct
    profiles, so there are never more contexts than profiles."""
    if profiles < 1:
        raise ValueError("the plan has no optimization profile")
    return list(range(max(1, min(contexts, profiles))))


def choose_profile(profiles: Sequence[BatchProfile], n: int) -> int:
    """Index of the profile that serves batch `n`: among those containing it, the one whose opt is nearest
    (TensorRT tunes kernels for opt). Raises ValueError when no profile holds n (callers split first)."""
    best: tuple[int, int] | None = None
    for i, p in enumerate(profiles):
        if p.contains(n):
            score = abs(p.opt - n)
            if best is None or score < best[0]:
                best = (score, i)
    if best is None:
        raise ValueError(f"batch {n} is outside every profile ({[(p.min, p.max) for p in profiles]})")
    return best[1]


def graph_buckets(profile: BatchProfile, limit: int = 8) -> tuple[int, ...]:
    """Batch sizes that get their own captured CUDA graph: powers of two inside the profile, plus its max.

    A CUDA graph replays fixed shapes, so a batch of 5 runs in the 8 bucket with 3 padded items; powers of
    two bound that waste to under half while keeping the number of captured graphs (GPU memory) small.
    """
    sizes: list[int] = []
    b = 1
    while b < profile.max:
        if b >= profile.min:
            sizes.append(b)
        b *= 2
    sizes.append(profile.max)
    if len(sizes) > limit:
        sizes = sizes[-limit:]
    if sizes[0] > profile.min:
        sizes.insert(0, profile.min)
    return tuple(sorted(set(sizes)))


def choose_bucket(buckets: Sequence[int], n: int) -> int:
    """Smallest bucket that holds `n` items (the batch is padded up to it)."""
    for b in sorted(buckets):
        if b >= n:
            return b
    raise ValueError(f"batch {n} exceeds the largest bucket {max(buckets) if buckets else None}")


def dtype_of(trt_dtype_name: str) -> str:
    """numpy dtype name for a TensorRT DataType (accepts 'DataType.FLOAT' or 'FLOAT')."""
    key = trt_dtype_name.rsplit(".", 1)[-1].upper()
    if key not in _TRT_DTYPES:
        raise ValueError(f"unsupported TensorRT dtype {trt_dtype_name!r}")
    return _TRT_DTYPES[key][0]


def itemsize_of(trt_dtype_name: str) -> int:
    key = trt_dtype_name.rsplit(".", 1)[-1].upper()
    if key not in _TRT_DTYPES:
        raise ValueError(f"unsupported TensorRT dtype {trt_dtype_name!r}")
    return _TRT_DTYPES[key][1]


def resolve_shape(shape: Sequence[int], batch: int) -> tuple[int, ...]:
    """Replace a dynamic (-1) dim 0 with `batch`; any other dynamic dim needs an explicit profile shape."""
    out = list(shape)
    if out and out[0] == -1:
        out[0] = batch
    if any(d < 0 for d in out):
        raise ValueError(
            f"shape {tuple(shape)} has dynamic dims besides the batch; give explicit profile shapes"
        )
    return tuple(out)


def nbytes(shape: Sequence[int], itemsize: int) -> int:
    n = itemsize
    for d in shape:
        if d < 0:
            raise ValueError(f"cannot size a buffer for dynamic shape {tuple(shape)}")
        n *= d
    return n


def aligned(n: int, alignment: int = 256) -> int:
    """Round up to the CUDA allocation alignment so several tensors can share one arena."""
    return (n + alignment - 1) // alignment * alignment


@dataclass(frozen=True)
class TensorLayout:
    """A tensor as the engine reports it (dim 0 = batch, -1 when dynamic)."""

    name: str
    dtype: str  # TensorRT DataType name, e.g. "FLOAT"
    shape: tuple[int, ...]
    is_input: bool


@dataclass(frozen=True)
class BufferPlan:
    """Byte size of every device/pinned-host buffer one execution context needs at the profile's max batch."""

    sizes: dict[str, int]
    max_shapes: dict[str, tuple[int, ...]]

    @property
    def total(self) -> int:
        return sum(aligned(s) for s in self.sizes.values())


def plan_buffers(
    tensors: Sequence[TensorLayout], max_batch: int, max_shapes: dict[str, tuple[int, ...]] | None = None
) -> BufferPlan:
    """Buffers sized once for the largest batch, so `infer` never allocates on the hot path.

    `max_shapes` overrides a tensor's shape (outputs whose non-batch dims depend on input size, taken from
    the context after `set_input_shape` at max shapes).
    """
    sizes: dict[str, int] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for t in tensors:
        shape = (max_shapes or {}).get(t.name) or resolve_shape(t.shape, max_batch)
        shapes[t.name] = tuple(shape)
        sizes[t.name] = nbytes(shape, itemsize_of(t.dtype))
    return BufferPlan(sizes, shapes)


def profile_shapes(
    inputs: Sequence[tuple[str, Sequence[int | str | None]]],
    profile: BatchProfile,
    fixed_dims: Mapping[str, Sequence[int] | Sequence[Sequence[int]]] | None = None,
) -> dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
    """min/opt/max shape per input for a batch profile; dims other than the batch must be static, or given in
    `fixed_dims` (name -> one full shape, or several: any batch value, e.g. RetinaFace at 640x640).

    Several shapes for one input span the profile: each non-batch dim ranges from its smallest to its largest
    value and opt is the first shape given (the detector runs 320x320 at warm-up and 320x192 for 16:9; a
    profile of one of them rejects the other at `set_input_shape`).
    """
    result: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}
    for name, shape in inputs:
        given = _shape_list(fixed_dims[name]) if fixed_dims and name in fixed_dims else [list(shape)]
        rests: list[list[int]] = []
        for base in given:
            rest: list[int] = []
            for d in base[1:]:
                if not isinstance(d, int) or d <= 0:
                    raise ValueError(
                        f"input {name} has a dynamic non-batch dim {tuple(shape)}: pass its "
                        f"shape (e.g. --shape {name}:1x3x640x640)"
                    )
                rest.append(d)
            rests.append(rest)
        if len({len(r) for r in rests}) != 1:
            raise ValueError(f"input {name}: shapes of different ranks given {given}")
        lo = [min(col) for col in zip(*rests, strict=True)]
        hi = [max(col) for col in zip(*rests, strict=True)]
        result[name] = ((profile.min, *lo), (profile.opt, *rests[0]), (profile.max, *hi))
    return result


def _shape_list(value: Sequence[int] | Sequence[Sequence[int]]) -> list[list[Any]]:
    """One shape (ints) or several -> a list of shapes."""
    items = list(value)
    if items and not isinstance(items[0], int):
        return [list(v) for v in items]  # type: ignore[call-overload]
    return [items]


def shape_string(shapes: dict[str, tuple[int, ...]]) -> str:
    """ORT TensorRT provider format: 'a:1x3x192x192,b:1x512'."""
    return ",".join(f"{name}:{'x'.join(str(d) for d in shape)}" for name, shape in shapes.items())


def parse_shape_arg(text: str) -> tuple[str, tuple[int, ...]]:
    """'input:1x3x640x640' -> ('input', (1, 3, 640, 640)); the CLI form of a fixed input shape."""
    name, sep, dims = text.rpartition(":")
    if not sep or not name:
        raise ValueError(f"expected NAME:DxDxD, got {text!r}")
    try:
        shape = tuple(int(d) for d in dims.lower().split("x"))
    except ValueError:
        raise ValueError(f"expected NAME:DxDxD, got {text!r}") from None
    if any(d <= 0 for d in shape):
        raise ValueError(f"dims must be positive in {text!r}")
    return name, shape
