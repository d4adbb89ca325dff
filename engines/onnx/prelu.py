"""Spell `PRelu` with constant slopes as `Relu`/`Mul`/`Add`, which ONNX Runtime's CPU kernels run much faster.

Why: FaceMesh as converted from TFLite has per-channel PRelu slopes, and ONNX Runtime's CPU PRelu takes a
generic broadcasting loop that dominates the model's time. For any slope s:

    PRelu(x, s) = Relu(x) * (1 - s) + x * s          (x > 0: x - xs + xs = x;  x <= 0: 0 + xs)

Only slopes that are float initializers are rewritten, `1 - s` folded here in float32, so outputs differ by
float rounding only; `engines.onnx.batch.verify_batch_equivalence` checks every rewritten model before use.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["prelu_as_relu", "constant_prelu_count"]


def _float_initializers(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    return {i.name: i for i in graph.initializer if i.data_type == TensorProto.FLOAT}


def constant_prelu_count(model: onnx.ModelProto) -> int:
    """How many top-level PRelu nodes have a float initializer as slope (what `prelu_as_relu` rewrites)."""
    inits = _float_initializers(model.graph)
    return sum(
        1 for n in model.graph.node if n.op_type == "PRelu" and len(n.input) == 2 and n.input[1] in inits
    )


def _fresh(taken: set[str], base: str) -> str:
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}{k}"
    taken.add(name)
    return name


def prelu_as_relu(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` with every constant-slope PRelu replaced in place by Relu(x)*(1-s) + x*s.

    Node order stays topological (the replacement sits where the PRelu was); names are fresh; the original
    slope initializer is kept (the `x * s` term uses it) and `1 - s` is added before the last initializer,
    which stays last. Nested graphs (If/Loop bodies) are left as they are.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    inits = _float_initializers(g)
    taken = {n.name for n in g.node} | {t for n in g.node for t in (*n.input, *n.output)} | set(inits)
    taken |= {v.name for v in (*g.input, *g.output, *g.value_info)}
    one_minus: dict[str, str] = {}
    added: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    changed = 0
    for node in g.node:
        if node.op_type != "PRelu" or len(node.input) != 2 or node.input[1] not in inits:
            nodes.append(node)
            continue
        x, slope = node.input
        (y,) = node.output
        base = node.name or y
        if slope not in one_minus:
            s = numpy_helper.to_array(inits[slope]).astype(np.float32)
            name = _fresh(taken, f"{slope}__one_minus")
            added.append(numpy_helper.from_array((np.float32(1.0) - s).astype(np.float32), name))
            one_minus[slope] = name
        relu, pos, neg = (_fresh(taken, f"{base}__{part}") for part in ("relu", "pos", "neg"))
        nodes += [
            helper.make_node("Relu", [x], [relu], name=relu),
            helper.make_node("Mul", [relu, one_minus[slope]], [pos], name=pos),
            helper.make_node("Mul", [x, slope], [neg], name=neg),
            helper.make_node("Add", [pos, neg], [y], name=_fresh(taken, f"{base}__sum")),
        ]
        changed += 1
    if changed:
        del g.node[:]
        g.node.extend(nodes)
        # the new constants go before the original last initializer, which stays last (inswapper's emap is
        # read from there)
        kept = [onnx.TensorProto() for _ in g.initializer]
        for copy, init in zip(kept, g.initializer, strict=True):
            copy.CopyFrom(init)
        del g.initializer[:]
        g.initializer.extend([*kept[:-1], *added, *kept[-1:]])
        onnx.checker.check_model(out)
        out.doc_string = (out.doc_string + "\n" if out.doc_string else "") + (
            f"livefuse prelu_as_relu: {changed} PRelu as Relu(x)*(1-s) + x*s"
        )
    return out
