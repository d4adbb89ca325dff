"""Turn a fixed-batch-1 ONNX model into a dynamic-batch one, and prove the rewrite changed nothing per item.

Why: cross-session batching needs every model to take N items at once, but many exports (inswapper_128,
FaceMesh from TFLite) bake batch 1 into constants, so renaming the input's dim 0 is not enough. The rewrite
makes dim 0 of every graph input and output symbolic and rewrites what bakes batch 1 on the batch path
(Reshape shapes, Concats with batch-1 constants, Slices that keep item 0, Flatten(axis=0)); ops that act on
the batch axis in ways that cannot be made per-item are refused. `verify_batch_equivalence` is the proof: the
original item by item against the rewrite batched, on the same random inputs. Run it after every rewrite.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

__all__ = [
    "BatchRewriteError",
    "BatchEquivalenceError",
    "make_batch_dynamic",
    "make_batch_dynamic_bytes",
    "verify_batch_equivalence",
]

_INT64_MAX = np.iinfo(np.int64).max


class BatchRewriteError(ValueError):
    """The graph does something with the batch axis that cannot be made per-item by rewriting constants."""


class BatchEquivalenceError(AssertionError):
    """The rewritten model's batched outputs differ from the original's item-by-item outputs."""


@dataclass
class _Constants:
    """Where each constant tensor lives: an initializer, or the `value` attribute of a `Constant` node."""

    initializers: dict[str, onnx.TensorProto]
    constant_nodes: dict[str, onnx.NodeProto]

    def get(self, name: str) -> np.ndarray | None:
        if name in self.initializers:
            return numpy_helper.to_array(self.initializers[name])
        node = self.constant_nodes.get(name)
        if node is not None:
            for attr in node.attribute:
                if attr.name == "value":
                    return numpy_helper.to_array(attr.t)
                if attr.name == "value_ints":
                    return np.asarray(list(attr.ints), dtype=np.int64)
                if attr.name == "value_int":
                    return np.asarray(attr.i, dtype=np.int64)
        return None


def _graph_input_names(graph: onnx.GraphProto) -> list[str]:
    inits = {i.name for i in graph.initializer}
    return [i.name for i in graph.input if i.name not in inits]


def _set_dim0(value: onnx.ValueInfoProto, dim_name: str) -> None:
    tt = value.type.tensor_type
    if not tt.HasField("shape") or len(tt.shape.dim) == 0:
        return
    dim = tt.shape.dim[0]
    if dim.HasField("dim_value") and dim.dim_value not in (0, 1):
        raise BatchRewriteError(
            f"{value.name}: batch dim is {dim.dim_value}; only batch-1 models are rewritten"
        )
    dim.Clear()
    dim.dim_param = dim_name


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int | None, ...]]:
    """Every tensor's shape as shape inference sees it in the fixed-batch model (None = unknown dim)."""
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # a model shape inference cannot follow still gets the rewrites that need no shapes
        inferred = model
    g = inferred.graph
    shapes: dict[str, tuple[int | None, ...]] = {}
    for v in list(g.input) + list(g.output) + list(g.value_info):
        tt = v.type.tensor_type
        if tt.HasField("shape"):
            shapes[v.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
    for init in g.initializer:
        shapes[init.name] = tuple(init.dims)
    return shapes


_SHAPE_OPS = {"Shape", "Size"}


def _batch_tensors(graph: onnx.GraphProto) -> set[str]:
    """Tensors that carry the batch: derived from graph-input data (their `Shape` is metadata, not data)."""
    carrying = set(_graph_input_names(graph))
    for node in graph.node:  # ONNX requires topological order
        if node.op_type in _SHAPE_OPS:
            continue
        data_inputs: Iterable[str] = node.input
        if node.op_type in {"Reshape", "Expand", "Tile", "Pad", "Slice"}:
            data_inputs = node.input[:1]
        if any(i in carrying for i in data_inputs if i):
            carrying.update(o for o in node.output if o)
    return carrying


def _attr(node: onnx.NodeProto, name: str, default: int) -> int:
    for a in node.attribute:
        if a.name == name:
            return int(a.i)
    return default


def _set_int_attr(node: onnx.NodeProto, name: str, value: int) -> None:
    for a in node.attribute:
        if a.name == name:
            a.i = value
            return
    node.attribute.append(helper.make_attribute(name, value))


def _ints_attr(node: onnx.NodeProto, name: str) -> list[int] | None:
    for a in node.attribute:
        if a.name == name:
            return list(a.ints)
    return None


class _Rewriter:
    def __init__(self, model: onnx.ModelProto, dim_name: str) -> None:
        self.model = model
        self.graph = model.graph
        self.dim_name = dim_name
        self.consts = _Constants(
            {i.name: i for i in self.graph.initializer},
            {n.output[0]: n for n in self.graph.node if n.op_type == "Constant" and n.output},
        )
        self.shapes = _static_shapes(model)
        self.batch = _batch_tensors(self.graph)
        self.used_names = {o for n in self.graph.node for o in n.output} | {i.name for i in self.graph.input}
        self.used_names |= set(self.consts.initializers)
        self.new_nodes: dict[int, list[onnx.NodeProto]] = {}  # index of node -> nodes to insert before it
        self.changes: list[str] = []

    def fresh(self, base: str) -> str:
        name, k = f"{base}__dynbatch", 0
        while name in self.used_names:
            k += 1
            name = f"{base}__dynbatch{k}"
        self.used_names.add(name)
        return name

    def add_initializer(self, base: str, value: np.ndarray) -> str:
        name = self.fresh(base)
        self.graph.initializer.append(numpy_helper.from_array(value, name))
        return name

    def dim0_is_one(self, name: str) -> bool:
        shape = self.shapes.get(name)
        return bool(shape) and shape is not None and shape[0] == 1

    def run(self) -> None:
        for idx, node in enumerate(self.graph.node):
            handler = getattr(self, f"_fix_{node.op_type.lower()}", None)
            if handler is not None:
                handler(idx, node)
        if self.new_nodes:
            nodes = list(self.graph.node)
            ordered: list[onnx.NodeProto] = []
            for idx, node in enumerate(nodes):
                ordered.extend(self.new_nodes.get(idx, []))
                ordered.append(node)
            del self.graph.node[:]
            self.graph.node.extend(ordered)

    # -- per-op fixes ------------------------------------------------------------------------------------
    def _fix_reshape(self, idx: int, node: onnx.NodeProto) -> None:
        if node.input[0] not in self.batch or len(node.input) < 2:
            return
        shape = self.consts.get(node.input[1])
        if shape is None or shape.ndim != 1 or shape.size == 0 or int(shape[0]) != 1:
            return
        new = shape.astype(np.int64).copy()
        allowzero = _attr(node, "allowzero", 0)
        has_minus_one = bool((new[1:] == -1).any())
        if not allowzero and self.dim0_is_one(node.input[0]):
            new[0] = 0  # copy dim 0 from the input: exact when dim 0 is the batch
        elif not has_minus_one:
            new[0] = -1
        elif not allowzero:
            new[0] = 0
        else:
            raise BatchRewriteError(
                f"Reshape {node.name!r}: shape {shape.tolist()} with allowzero=1 and a "
                "-1 elsewhere leaves no way to let the batch flow"
            )
        node.input[1] = self.add_initializer(node.input[1], new)
        label = node.name or node.output[0]
        self.changes.append(f"Reshape {label}: shape {shape.tolist()} -> {new.tolist()}")

    def _fix_concat(self, idx: int, node: onnx.NodeProto) -> None:
        live = [i for i in node.input if i in self.batch]
        if not live:
            return
        sibling = live[0]
        rank = len(self.shapes.get(sibling, ()))
        axis = _attr(node, "axis", 0)
        if rank and axis < 0:
            axis += rank
        if axis == 0:
            return
        for pos, name in enumerate(node.input):
            if name in self.batch or not name or not self.dim0_is_one(name):
                continue
            in_rank = len(self.shapes[name])
            if in_rank < 2:
                continue
            # Expand to [batch of sibling, 1, 1, ...] broadcasts the batch-1 constant to the live batch
            shp = self.fresh(f"{name}_shape")
            b = self.fresh(f"{name}_batch")
            ones = self.add_initializer(f"{name}_ones", np.ones(in_rank - 1, dtype=np.int64))
            target = self.fresh(f"{name}_target")
            zero = self.add_initializer("zero", np.array([0], np.int64))
            one = self.add_initializer("one", np.array([1], np.int64))
            expanded = self.fresh(name)
            self.new_nodes.setdefault(idx, []).extend(
                [
                    helper.make_node("Shape", [sibling], [shp], name=shp),
                    helper.make_node("Slice", [shp, zero, one], [b], name=b),
                    helper.make_node("Concat", [b, ones], [target], axis=0, name=target),
                    helper.make_node("Expand", [name, target], [expanded], name=expanded),
                ]
            )
            node.input[pos] = expanded
            label = node.name or node.output[0]
            self.changes.append(f"Concat {label}: batch-1 input {name} expanded to the batch")

    def _fix_slice(self, idx: int, node: onnx.NodeProto) -> None:
        if node.input[0] not in self.batch or len(node.input) < 3:
            return
        starts, ends = self.consts.get(node.input[1]), self.consts.get(node.input[2])
        axes = self.consts.get(node.input[3]) if len(node.input) > 3 and node.input[3] else None
        if starts is None or ends is None:
            return
        axes_list = list(range(starts.size)) if axes is None else [int(a) for a in axes.reshape(-1)]
        rank = len(self.shapes.get(node.input[0], ()))
        axes_list = [a + rank if a < 0 and rank else a for a in axes_list]
        if 0 not in axes_list:
            return
        k = axes_list.index(0)
        first_only = int(starts.reshape(-1)[k]) == 0 and int(ends.reshape(-1)[k]) == 1
        if first_only and self.dim0_is_one(node.input[0]):
            new = ends.reshape(-1).astype(ends.dtype).copy()
            new[k] = np.iinfo(new.dtype).max if np.issubdtype(new.dtype, np.integer) else _INT64_MAX
            node.input[2] = self.add_initializer(node.input[2], new)
            self.changes.append(f"Slice {node.name or node.output[0]}: batch [0:1] -> [0:]")

    def _fix_flatten(self, idx: int, node: onnx.NodeProto) -> None:
        if node.input[0] in self.batch and _attr(node, "axis", 1) == 0 and self.dim0_is_one(node.input[0]):
            _set_int_attr(node, "axis", 1)
            self.changes.append(f"Flatten {node.name or node.output[0]}: axis 0 -> 1")

    def _fix_pad(self, idx: int, node: onnx.NodeProto) -> None:
        if node.input[0] not in self.batch:
            return
        pads_attr = _ints_attr(node, "pads")
        pads = (
            np.asarray(pads_attr)
            if pads_attr is not None
            else (self.consts.get(node.input[1]) if len(node.input) > 1 and node.input[1] else None)
        )
        if pads is None:
            return
        axes = self.consts.get(node.input[3]) if len(node.input) > 3 and node.input[3] else None
        pads = pads.reshape(-1)
        half = pads.size // 2
        axes_list = list(range(half)) if axes is None else [int(a) for a in axes.reshape(-1)]
        rank = len(self.shapes.get(node.input[0], ()))
        axes_list = [a + rank if a < 0 and rank else a for a in axes_list]
        if 0 in axes_list:
            k = axes_list.index(0)
            if int(pads[k]) != 0 or int(pads[k + half]) != 0:
                raise BatchRewriteError(
                    f"Pad {node.name!r} pads the batch axis ({pads.tolist()}): not per-item"
                )

    def _fix_tile(self, idx: int, node: onnx.NodeProto) -> None:
        if node.input[0] not in self.batch:
            return
        reps = self.consts.get(node.input[1])
        if reps is not None and reps.size and int(reps.reshape(-1)[0]) != 1:
            raise BatchRewriteError(
                f"Tile {node.name!r} repeats the batch axis ({reps.tolist()}): not per-item"
            )

    def _fix_gather(self, idx: int, node: onnx.NodeProto) -> None:
        if node.input[0] in self.batch and _attr(node, "axis", 0) == 0 and self.dim0_is_one(node.input[0]):
            raise BatchRewriteError(f"Gather {node.name!r} indexes the batch axis: not per-item")

    def _fix_squeeze(self, idx: int, node: onnx.NodeProto) -> None:
        if node.input[0] not in self.batch or not self.dim0_is_one(node.input[0]):
            return
        axes_attr = _ints_attr(node, "axes")
        axes = (
            np.asarray(axes_attr)
            if axes_attr is not None
            else (self.consts.get(node.input[1]) if len(node.input) > 1 and node.input[1] else None)
        )
        if axes is None or 0 in [int(a) for a in axes.reshape(-1)]:
            raise BatchRewriteError(f"Squeeze {node.name!r} removes the batch axis: not per-item")


def _used_names(graph: onnx.GraphProto) -> set[str]:
    return {i for n in graph.node for i in n.input} | {o.name for o in graph.output}


def _prune_unused_initializers(graph: onnx.GraphProto, candidates: set[str]) -> None:
    """Drop the initializers the rewrite orphaned (`candidates`: used before it). Initializers the graph never
    used stay, in order: inswapper's `emap` is its last, unused initializer and is read from there, and an
    export that also lists initializers as graph inputs would otherwise ask for them at run time."""
    used = _used_names(graph)
    keep = [i for i in graph.initializer if i.name not in candidates or i.name in used]
    if len(keep) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(keep)


def make_batch_dynamic(model: onnx.ModelProto, dim_name: str = "N") -> onnx.ModelProto:
    """Return a copy of `model` whose dim 0 is the symbolic batch `dim_name` end to end (see module docs)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    rw = _Rewriter(out, dim_name)
    before = {i.name for i in out.graph.initializer} & _used_names(out.graph)
    rw.run()
    g = out.graph
    input_names = set(_graph_input_names(g))
    for v in g.input:
        if v.name in input_names:
            _set_dim0(v, dim_name)
    for v in g.output:
        _set_dim0(v, dim_name)
    # Stale shapes would pin batch 1 again; shape inference re-derives them with the symbolic batch.
    del g.value_info[:]
    _prune_unused_initializers(g, before)
    if model.graph.initializer:  # the original's last initializer stays last (how inswapper's emap is found)
        last = model.graph.initializer[-1].name
        order = sorted(range(len(g.initializer)), key=lambda k: g.initializer[k].name == last)
        if order != list(range(len(g.initializer))):
            moved = [g.initializer[k] for k in order]
            copies = [onnx.TensorProto() for _ in moved]
            for c, m in zip(copies, moved, strict=True):
                c.CopyFrom(m)
            del g.initializer[:]
            g.initializer.extend(copies)
    try:
        inferred = shape_inference.infer_shapes(out, strict_mode=False)
        g.value_info.extend(v for v in inferred.graph.value_info if not _dim0_fixed_one(v))
    except Exception:  # value_info is optional: runtimes infer it themselves
        pass
    onnx.checker.check_model(out)
    out.doc_string = (
        (out.doc_string + "\n" if out.doc_string else "")
        + "livefuse make_batch_dynamic: "
        + ("; ".join(rw.changes) if rw.changes else "dim 0 made symbolic")
    )
    return out


def _dim0_fixed_one(v: onnx.ValueInfoProto) -> bool:
    tt = v.type.tensor_type
    return tt.HasField("shape") and len(tt.shape.dim) > 0 and tt.shape.dim[0].dim_value == 1


def make_batch_dynamic_bytes(data: bytes, dim_name: str = "N") -> bytes:
    return make_batch_dynamic(onnx.load_model_from_string(data), dim_name).SerializeToString()


def _random_input(rng: np.random.Generator, elem_type: int, shape: Sequence[int]) -> np.ndarray:
    np_type = helper.tensor_dtype_to_np_dtype(elem_type)
    if np.issubdtype(np_type, np.floating):
        return rng.standard_normal(shape).astype(np_type)
    if np_type == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    return rng.integers(0, 2, shape).astype(np_type)


def verify_batch_equivalence(
    original: bytes,
    rewritten: bytes,
    batch_sizes: Sequence[int] = (1, 3),
    atol: float = 1e-4,
    rtol: float = 1e-4,
    seed: int = 0,
) -> float:
    """Largest |batched - item-by-item| over all outputs and batch sizes; raises past atol + rtol*max|ref|.

    Float32 kernels may pick different reduction orders for a larger batch, so the tolerance scales with the
    outputs' magnitude (FaceMesh outputs pixel coordinates up to ~192).
    """
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    ref = ort.InferenceSession(original, sess_options=opts, providers=["CPUExecutionProvider"])
    new = ort.InferenceSession(rewritten, sess_options=opts, providers=["CPUExecutionProvider"])
    model = onnx.load_model_from_string(original)
    inits = {i.name for i in model.graph.initializer}
    specs = [v for v in model.graph.input if v.name not in inits]
    rng = np.random.default_rng(seed)
    worst = 0.0
    for n in batch_sizes:
        items: list[dict[str, np.ndarray]] = []
        for _ in range(n):
            feed: dict[str, np.ndarray] = {}
            for v in specs:
                dims = [d.dim_value if d.HasField("dim_value") else 1 for d in v.type.tensor_type.shape.dim]
                dims[0] = 1
                feed[v.name] = _random_input(rng, v.type.tensor_type.elem_type, dims)
            items.append(feed)
        singles = [ref.run(None, f) for f in items]
        batched_feed = {k: np.concatenate([f[k] for f in items]) for k in items[0]}
        batched = new.run(None, batched_feed)
        for j, out in enumerate(batched):
            expect = np.concatenate([np.asarray(s[j]) for s in singles])
            got = np.asarray(out)
            if got.shape != expect.shape:
                raise BatchEquivalenceError(f"batch {n}, output {j}: shape {got.shape} != {expect.shape}")
            if expect.size == 0:
                continue
            diff = float(np.max(np.abs(got.astype(np.float64) - expect.astype(np.float64))))
            limit = atol + rtol * float(np.max(np.abs(expect.astype(np.float64))))
            if diff > limit:
                raise BatchEquivalenceError(f"batch {n}, output {j}: max abs diff {diff:.3g} > {limit:.3g}")
            worst = max(worst, diff)
    return worst


def elem_type_name(elem_type: int) -> str:
    """ONNX element type as its TensorProto name (FLOAT, FLOAT16, ...), for messages."""
    return str(TensorProto.DataType.Name(elem_type))
