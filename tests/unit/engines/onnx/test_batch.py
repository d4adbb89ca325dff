"""make_batch_dynamic: constants that bake batch 1 are rewritten so N items give N per-item results."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engines.models.store import ModelStore
from engines.onnx.batch import (
    BatchEquivalenceError,
    BatchRewriteError,
    make_batch_dynamic,
    make_batch_dynamic_bytes,
    verify_batch_equivalence,
)

REPO = Path(__file__).resolve().parents[4]


def _fixed_batch_model() -> onnx.ModelProto:
    """A batch-1 graph like inswapper/BlazeFace exports: Pad, baked Reshape, constant Concat, Flatten."""
    rng = np.random.default_rng(1)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    style = helper.make_tensor_value_info("style", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 160])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 2, 4, 4])
    inits = [
        numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"),  # H/W only
        numpy_helper.from_array(np.array([1, 2, 36], np.int64), "shape_b1"),  # bakes batch 1
        numpy_helper.from_array(np.array([1, 4, 2, 1, 1], np.int64), "style_shape"),  # bakes batch 1
        numpy_helper.from_array(np.array([1, 1, 36], np.int64), "token_shape"),
        numpy_helper.from_array(rng.standard_normal(2).astype(np.float32), "bias"),
        numpy_helper.from_array(np.array([1, 2, 1, 1], np.int64), "bias_shape"),  # weight, not batch
        numpy_helper.from_array(np.array([0], np.int64), "s0"),
        numpy_helper.from_array(np.array([1], np.int64), "e1"),
        numpy_helper.from_array(np.array([0], np.int64), "ax0"),
    ]
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["xp"], mode="reflect"),
        helper.make_node("Reshape", ["xp", "shape_b1"], ["r"]),
        helper.make_node(
            "ConstantOfShape",
            ["token_shape"],
            ["token"],
            value=numpy_helper.from_array(np.array([0.5], np.float32)),
        ),
        helper.make_node("Concat", ["r", "token"], ["rc"], axis=1),  # [1, 3, 36]
        helper.make_node("Flatten", ["rc"], ["flat"], axis=0),  # [1, 108]
        helper.make_node("Reshape", ["style", "style_shape"], ["s5"]),  # [1,4,2,1,1]
        helper.make_node("Flatten", ["s5"], ["sflat"], axis=1),  # [1, 8]
        helper.make_node("Slice", ["sflat", "s0", "e1", "ax0"], ["sfirst"]),  # items [0:1]
        helper.make_node(
            "Concat",
            ["flat", "sfirst", "sfirst", "sfirst", "sfirst", "sfirst", "sfirst", "sfirst"],
            ["y0"],
            axis=1,
        ),  # [1, 164]
        helper.make_node("Slice", ["y0", "s0", "e160", "ax1"], ["y"]),
        helper.make_node("Reshape", ["bias", "bias_shape"], ["b4"]),
        helper.make_node("Add", ["x", "b4"], ["z0"]),
        helper.make_node("Mul", ["z0", "b4"], ["z"]),
    ]
    inits += [
        numpy_helper.from_array(np.array([160], np.int64), "e160"),
        numpy_helper.from_array(np.array([1], np.int64), "ax1"),
    ]
    graph = helper.make_graph(nodes, "fixed_b1", [x, style], [y, z], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _rename_only(model: onnx.ModelProto) -> bytes:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.shape.dim[0].dim_param = "N"
    del m.graph.value_info[:]
    return m.SerializeToString()


def test_renaming_the_input_dim_alone_is_not_enough() -> None:
    original = _fixed_batch_model().SerializeToString()
    with pytest.raises((BatchEquivalenceError, Exception)):
        verify_batch_equivalence(original, _rename_only(_fixed_batch_model()), batch_sizes=(3,))


def test_generated_graph_becomes_batch_dynamic() -> None:
    model = _fixed_batch_model()
    original = model.SerializeToString()
    dyn = make_batch_dynamic(model, "batch")
    for v in list(dyn.graph.input) + list(dyn.graph.output):
        assert v.type.tensor_type.shape.dim[0].dim_param == "batch"
    # the original is untouched
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 1
    # the weight reshape keeps its batch-1 shape; the batch reshapes get a fresh, rewritten shape
    inits = {i.name: numpy_helper.to_array(i) for i in dyn.graph.initializer}
    assert inits["bias_shape"].tolist() == [1, 2, 1, 1]
    reshapes = {n.output[0]: n for n in dyn.graph.node if n.op_type == "Reshape"}
    assert inits[reshapes["r"].input[1]][0] in (0, -1)
    assert inits[reshapes["s5"].input[1]][0] in (0, -1)
    assert reshapes["b4"].input[1] == "bias_shape"
    diff = verify_batch_equivalence(original, dyn.SerializeToString(), batch_sizes=(1, 3, 5))
    assert diff < 1e-5


def test_unused_initializers_are_kept_in_order() -> None:
    """inswapper keeps its emap as the last, unused initializer (some exports also list initializers as
    graph inputs): the rewrite must keep it there, or the emap is lost and the model asks for it as input."""
    model = _fixed_batch_model()
    emap = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "emap")
    model.graph.initializer.append(emap)
    model.graph.input.append(helper.make_tensor_value_info("emap", TensorProto.FLOAT, [4, 4]))
    dyn = make_batch_dynamic(model, "N")
    assert dyn.graph.initializer[-1].name == "emap"
    kept = numpy_helper.to_array(dyn.graph.initializer[-1])
    np.testing.assert_array_equal(kept, numpy_helper.to_array(emap))
    sess = ort.InferenceSession(dyn.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    y, _ = sess.run(
        None,
        {
            "x": rng.standard_normal((3, 2, 4, 4)).astype(np.float32),
            "style": rng.standard_normal((3, 8)).astype(np.float32),
        },
    )
    assert y.shape[0] == 3


def test_batched_outputs_are_per_item() -> None:
    """Item 2 of a batch equals item 2 run alone (a batch-mixing rewrite would fail this)."""
    model = _fixed_batch_model()
    dyn = make_batch_dynamic_bytes(model.SerializeToString())
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 2, 4, 4)).astype(np.float32)
    s = rng.standard_normal((4, 8)).astype(np.float32)
    sess = ort.InferenceSession(dyn, providers=["CPUExecutionProvider"])
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y, z = sess.run(None, {"x": x, "style": s})
    assert y.shape == (4, 160) and z.shape == (4, 2, 4, 4)
    y2, z2 = ref.run(None, {"x": x[2:3], "style": s[2:3]})
    np.testing.assert_allclose(y[2:3], y2, atol=1e-6)
    np.testing.assert_allclose(z[2:3], z2, atol=1e-6)


def test_pad_on_batch_axis_is_refused() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])
    pads = numpy_helper.from_array(np.array([0, 0, 1, 0], np.int64), "pads")
    graph = helper.make_graph([helper.make_node("Pad", ["x", "pads"], ["y"])], "g", [x], [y], [pads])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(BatchRewriteError, match="pads the batch axis"):
        make_batch_dynamic(model)


def test_verify_detects_a_batch_mixing_model() -> None:
    """A model that reduces over dim 0 is not per-item: verification must say so, not pass silently."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    node = helper.make_node("ReduceMean", ["x"], ["y"], axes=[0], keepdims=1)
    graph = helper.make_graph([node], "g", [x], [y])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    with pytest.raises(BatchEquivalenceError):
        verify_batch_equivalence(data, make_batch_dynamic_bytes(data))


def test_real_facemesh_batch_4_equals_4_single_runs(model_store: ModelStore) -> None:
    from engines.models.registry import get_spec

    path = model_store.path(get_spec("facemesh_468"))
    original = path.read_bytes()
    dyn = make_batch_dynamic_bytes(original)
    model = onnx.load_model_from_string(dyn)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    diff = verify_batch_equivalence(original, dyn, batch_sizes=(4,))
    assert diff <= 1e-3
    out = ort.InferenceSession(dyn, providers=["CPUExecutionProvider"]).run(
        None, {"input_1": np.random.default_rng(0).random((4, 3, 192, 192), dtype=np.float32)}
    )
    assert out[0].shape == (4, 1404, 1, 1) and out[1].shape == (4, 1, 1, 1)


def test_build_engines_cli_make_batch_dynamic(tmp_path: Path) -> None:
    src, dst = tmp_path / "fixed.onnx", tmp_path / "dyn.onnx"
    onnx.save(_fixed_batch_model(), src)
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "build_engines.py"),
            "--make-batch-dynamic",
            str(src),
            str(dst),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert "max abs diff" in proc.stdout
    out = onnx.load(dst)
    assert out.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"


def test_build_engines_cli_missing_input_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "build_engines.py"),
            "--make-batch-dynamic",
            str(tmp_path / "nope.onnx"),
            str(tmp_path / "o.onnx"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_build_engines_without_tensorrt_is_one_line(tmp_path: Path) -> None:
    try:
        import tensorrt  # noqa: F401

        pytest.skip("tensorrt is installed here")
    except ImportError:
        pass
    src = tmp_path / "m.onnx"
    onnx.save(make_batch_dynamic(_fixed_batch_model()), src)
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "build_engines.py"),
            str(src),
            "--out-dir",
            str(tmp_path / "plans"),
            "--max-batch",
            "8",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "build_engines: TensorRT backend needs an NVIDIA GPU and `pip install 'livefuse[gpu]'`"
    )
