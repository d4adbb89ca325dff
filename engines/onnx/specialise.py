"""An ONNX model specialised to one full input shape: every shape computation folded into constants.

Why: RetinaFace computes its reshape targets and upsample sizes at run time (Shape -> Gather -> Concat ->
Reshape/Resize). Converted to PyTorch that becomes small index tensors on the device that are read back to
the host (`.tolist()`), a synchronisation per op, which also forbids capturing the forward in a CUDA graph.
A CUDA graph replays one shape anyway, so each captured shape gets a graph whose shape work is done once,
here: the inputs' dims are fixed, shapes inferred, `Shape` nodes replaced by constants, and every node whose
inputs are all small constants evaluated (ONNX's reference evaluator) until nothing changes. Weights are never
folded (only constants up to `SMALL` elements), so the specialised copy shares them with the generic one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx

SMALL = 4096  # elements: shape-sized constants, never weights
SHAPE_OPS = frozenset({"Shape", "Size"})


def has_shape_ops(model: onnx.ModelProto) -> bool:
    """Whether the graph computes anything from its tensors' shapes (then it needs `specialise` per shape)."""
    return any(n.op_type in SHAPE_OPS for n in model.graph.node)


def specialise(model: onnx.ModelProto, shapes: Mapping[str, tuple[int, ...]]) -> onnx.ModelProto:
    """A copy of `model` for exactly these input shapes, with its shape computations folded away.

    Raises ValueError when a `Shape` node's input has no static shape after inference (the graph's shapes
    depend on data, which no specialisation can remove).
    """
    import onnx
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    for value in graph.input:
        if value.name in shapes:
            dims = value.type.tensor_type.shape.dim
            shape = shapes[value.name]
            if len(dims) != len(shape):
                raise ValueError(f"input {value.name}: rank {len(dims)}, shape {shape} given")
            for d, n in zip(dims, shape, strict=True):
                d.Clear()
                d.dim_value = int(n)
    # Each pass folds what the inferred shapes allow; a folded Resize size or Reshape target gives the next
    # pass the static shapes downstream of it.
    while True:
        out = onnx.shape_inference.infer_shapes(out, data_prop=True)
        graph = out.graph
        static = _static_shapes(out)
        consts: dict[str, Any] = {
            i.name: numpy_helper.to_array(i) for i in graph.initializer if _size(i.dims) <= SMALL
        }
        opsets = list(out.opset_import)
        kept: list[onnx.NodeProto] = []
        folded = 0
        for node in graph.node:
            value = _fold(node, consts, static, opsets)
            if value is None:
                kept.append(node)
                continue
            folded += 1
            for name, array in zip(node.output, value, strict=True):
                consts[name] = array
                kept.append(
                    onnx.helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array, name))
                )
        del graph.node[:]
        graph.node.extend(kept)
        left = [n for n in graph.node if n.op_type in SHAPE_OPS]
        if not left:
            break
        if not folded:
            raise ValueError(
                f"{left[0].op_type} node {left[0].name or left[0].output[0]}: its input "
                f"{left[0].input[0]} has no static shape after inference"
            )
    return _drop_dead_constants(out)


def inline_identities(model: onnx.ModelProto) -> onnx.ModelProto:
    """Consumers of `Identity(initializer)` read the initializer itself (exporters emit these for shared
    weights; onnx2torch wants a Conv's weight as an initializer). Returns a copy."""
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {i.name for i in graph.initializer}
    outputs = {o.name for o in graph.output}
    alias = {
        n.output[0]: n.input[0]
        for n in graph.node
        if n.op_type == "Identity" and n.input[0] in inits and n.output[0] not in outputs
    }
    if not alias:
        return out
    kept = [n for n in graph.node if not (n.op_type == "Identity" and n.output[0] in alias)]
    for n in kept:
        for k, name in enumerate(n.input):
            if name in alias:
                n.input[k] = alias[name]
    del graph.node[:]
    graph.node.extend(kept)
    return out


def _fold(
    node: onnx.NodeProto, consts: dict[str, Any], static: dict[str, tuple[int, ...]], opsets: list[Any]
) -> list[Any] | None:
    import numpy as np

    if node.op_type == "Constant":
        from onnx import numpy_helper

        attr = {a.name: a for a in node.attribute}
        if "value" in attr:
            array = numpy_helper.to_array(attr["value"].t)
            if array.size <= SMALL:
                consts[node.output[0]] = array
        return None
    if node.op_type == "Shape":
        shape = static.get(node.input[0])
        if shape is None:
            return None
        start = next((a.i for a in node.attribute if a.name == "start"), 0)
        end = next((a.i for a in node.attribute if a.name == "end"), len(shape))
        return [np.asarray(shape[start:end], dtype=np.int64)]
    if node.op_type == "Size" and node.input[0] in static:
        return [np.asarray(int(np.prod(static[node.input[0]])), dtype=np.int64)]
    inputs = [i for i in node.input if i]
    if node.domain not in ("", "ai.onnx") or not inputs or any(i not in consts for i in inputs):
        return None
    from onnx.reference import ReferenceEvaluator

    one = _one_node_model(node, {i: consts[i] for i in inputs}, opsets)
    results = ReferenceEvaluator(one).run(None, {})
    arrays = [np.asarray(r) for r in results]
    if any(a.size > SMALL for a in arrays):
        return None
    return arrays


def _one_node_model(node: onnx.NodeProto, inputs: Mapping[str, Any], opsets: list[Any]) -> onnx.ModelProto:
    import onnx
    from onnx import numpy_helper

    inits = [numpy_helper.from_array(v, k) for k, v in inputs.items()]
    outs = [onnx.helper.make_empty_tensor_value_info(o) for o in node.output]
    graph = onnx.helper.make_graph([node], "fold", [], outs, initializer=inits)
    return onnx.helper.make_model(graph, opset_imports=opsets)


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for v in (*model.graph.input, *model.graph.value_info, *model.graph.output):
        dims = v.type.tensor_type.shape.dim
        if v.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            out[v.name] = tuple(int(d.dim_value) for d in dims)
    for i in model.graph.initializer:
        out[i.name] = tuple(int(d) for d in i.dims)
    return out


def _drop_dead_constants(model: onnx.ModelProto) -> onnx.ModelProto:
    """Remove Constant nodes and initializers that nothing reads any more (the folded shape chains)."""
    graph = model.graph
    while True:
        used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
        dead = [n for n in graph.node if n.op_type == "Constant" and not any(o in used for o in n.output)]
        if not dead:
            break
        for n in dead:
            graph.node.remove(n)
    used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
    keep = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    return model


def _size(dims: Any) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n
