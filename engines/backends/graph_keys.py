"""What a captured CUDA graph is keyed by, and which shapes are captured at warm-up (no GPU needed).

A CUDA graph replays the exact kernels it recorded, for the exact shapes it recorded: keyed by batch alone,
a graph captured for a 320x320 detector input would replay for a 320x192 one and return garbage. So the key
is every input's full shape after padding the batch to its bucket. Warm-up captures one graph per bucket and
per configured input shape (several shapes may be configured for one input: the detector's square warm-up
size and its 16:9 letterbox), so no capture happens on the live path for a configured shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engines.engine import TensorSpec

GraphKey = tuple[tuple[str, tuple[int, ...]], ...]


def graph_key(shapes: Mapping[str, tuple[int, ...]], bucket: int) -> GraphKey:
    """The key of the graph that runs these input shapes with the batch padded to `bucket`."""
    return tuple(sorted((name, (bucket, *shape[1:])) for name, shape in shapes.items()))


def shapes_by_input(input_shapes: Sequence[tuple[str, tuple[int, ...]]]) -> dict[str, list[tuple[int, ...]]]:
    """Configured full shapes per input name, in order, without repeats (one input may have several)."""
    out: dict[str, list[tuple[int, ...]]] = {}
    for name, shape in input_shapes:
        seen = out.setdefault(name, [])
        if tuple(shape) not in seen:
            seen.append(tuple(shape))
    return out


def warmup_shapes(
    inputs: Sequence[TensorSpec], input_shapes: Sequence[tuple[str, tuple[int, ...]]]
) -> list[dict[str, tuple[int, ...]]]:
    """Input shape sets (batch 1) to warm up: one per configured shape of the model's dynamic inputs, or the
    static shape when every non-batch dim is fixed. Empty when a dynamic dim has no configured shape (that
    model's graphs are captured on first use instead)."""
    configured = shapes_by_input(input_shapes)
    variants = max((len(configured.get(s.name, ())) for s in inputs), default=0)
    out: list[dict[str, tuple[int, ...]]] = []
    for i in range(max(variants, 1)):
        one: dict[str, tuple[int, ...]] = {}
        for spec in inputs:
            given = configured.get(spec.name)
            if given:
                one[spec.name] = (1, *given[min(i, len(given) - 1)][1:])
                continue
            rest = spec.shape[1:]
            if not all(isinstance(d, int) and d > 0 for d in rest):
                return []
            one[spec.name] = (1, *(int(d) for d in rest if isinstance(d, int)))
        out.append(one)
    return out
