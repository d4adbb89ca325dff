"""prelu_as_relu: constant-slope PRelu becomes Relu(x)*(1-s) + x*s, same outputs; serving_model caches it."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engines.models.store import ModelStore
from engines.onnx.model_cache import REWRITE_VERSION, serving_model
from engines.onnx.prelu import constant_prelu_count, prelu_as_relu


def _prelu_model(batch: int | str = 1, slope_as_input: bool = False) -> onnx.ModelProto:
    """Conv -> PRelu -> PRelu (sharing one slope) -> PRelu with a (C,1,1) slope, like FaceMesh as converted.

    Slopes cover negative, zero, between 0 and 1, 1, and above 1. The last initializer is an unused 2x2 "emap"
    (as inswapper_128 keeps its embedding map), which must stay last.
    """
    rng = np.random.default_rng(7)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 5, 8, 8])
    slope = np.array([-0.5, 0.0, 0.25, 1.0, 3.0], np.float32)
    inits = [
        numpy_helper.from_array(rng.standard_normal((5, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(slope.reshape(1, 5, 1, 1), "s4"),
        numpy_helper.from_array(slope[::-1].copy().reshape(5, 1, 1), "s3"),
        numpy_helper.from_array(np.eye(2, dtype=np.float32), "emap"),
    ]
    inputs = [x]
    if slope_as_input:
        inits = [i for i in inits if i.name != "s4"]
        inputs.append(helper.make_tensor_value_info("s4", TensorProto.FLOAT, [1, 5, 1, 1]))
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("PRelu", ["c", "s4"], ["p1"], name="p_re_lu"),
        helper.make_node("PRelu", ["p1", "s4"], ["p2"], name="p_re_lu_1"),
        helper.make_node("PRelu", ["p2", "s3"], ["y"], name="p_re_lu_2"),
    ]
    graph = helper.make_graph(nodes, "prelu", inputs, [y], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _run(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, feed)[0])


def test_prelu_is_replaced_and_outputs_match() -> None:
    model = _prelu_model()
    assert constant_prelu_count(model) == 3
    out = prelu_as_relu(model)
    ops = [n.op_type for n in out.graph.node]
    assert "PRelu" not in ops
    assert ops.count("Relu") == 3 and ops.count("Mul") == 6 and ops.count("Add") == 3
    assert out.graph.initializer[-1].name == "emap"
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    expect = _run(model, {"x": x})
    assert (expect < 0).any() and (expect > 0).any()  # both branches of every slope exercised
    np.testing.assert_allclose(_run(out, {"x": x}), expect, rtol=1e-5, atol=1e-5)


def test_slope_computed_at_run_time_is_left_alone() -> None:
    model = _prelu_model(slope_as_input=True)
    out = prelu_as_relu(model)
    ops = [n.op_type for n in out.graph.node]
    assert ops.count("PRelu") == 2  # the two reading the graph input "s4"
    assert ops.count("Relu") == 1  # the one with the constant "s3"
    assert constant_prelu_count(out) == 0


def test_serving_model_rewrites_batch_and_prelu_once(tmp_path: Path) -> None:
    src = tmp_path / "m.onnx"
    onnx.save(_prelu_model(batch=1), str(src))
    stale = [tmp_path / "m.dynbatch-0123456789abcdef.onnx", tmp_path / "m.serve1-0123456789abcdef.onnx"]
    for old in stale:
        old.write_bytes(b"made by an older rewrite")
    served = serving_model(src)
    assert not any(old.exists() for old in stale)
    assert served != src and served.name.startswith(f"m.serve{REWRITE_VERSION}-")
    model = onnx.load(str(served))
    assert constant_prelu_count(model) == 0
    assert not model.graph.input[0].type.tensor_type.shape.dim[0].HasField("dim_value")  # batch is dynamic
    x = np.random.default_rng(1).standard_normal((3, 3, 8, 8)).astype(np.float32)
    one_by_one = np.concatenate([_run(_prelu_model(batch=1), {"x": x[i : i + 1]}) for i in range(3)])
    np.testing.assert_allclose(_run(model, {"x": x}), one_by_one, rtol=1e-5, atol=1e-5)
    mtime = served.stat().st_mtime_ns
    assert serving_model(src) == served and served.stat().st_mtime_ns == mtime


def test_serving_model_keeps_a_model_with_nothing_to_rewrite(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "plain", [x], [y])
    src = tmp_path / "plain.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(src))
    assert serving_model(src) == src
    assert [p.name for p in tmp_path.iterdir()] == ["plain.onnx"]


def test_serving_model_falls_back_when_the_check_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import engines.onnx.prelu as prelu

    def wrong(model: onnx.ModelProto) -> onnx.ModelProto:  # a broken rewrite: PRelu -> Relu
        out = onnx.ModelProto()
        out.CopyFrom(model)
        for n in out.graph.node:
            if n.op_type == "PRelu":
                n.op_type = "Relu"
                del n.input[1:]
        return out

    monkeypatch.setattr(prelu, "prelu_as_relu", wrong)
    src = tmp_path / "m.onnx"
    onnx.save(_prelu_model(batch="N"), str(src))
    with caplog.at_level(logging.WARNING):
        assert serving_model(src) == src
    assert "failed its check" in caplog.text
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


def test_facemesh_serving_copy_matches_the_converted_model(model_store: ModelStore, tmp_path: Path) -> None:
    """The real FaceMesh: every PRelu goes, and the 468 points move by float rounding only."""
    path = model_store.require("facemesh_468")
    original = onnx.load(str(path))
    assert constant_prelu_count(original) == 23
    rewritten = prelu_as_relu(original)
    x = np.random.default_rng(2).random((1, 3, 192, 192), dtype=np.float32)
    name = original.graph.input[0].name
    mesh, got = _run(original, {name: x}), _run(rewritten, {name: x})
    assert mesh.shape == (1, 1404, 1, 1)
    assert float(np.abs(got - mesh).max()) < 1e-3  # pixels, at 192 px
