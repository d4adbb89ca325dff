"""Small ONNX graphs with the signatures of the user-supplied models (inswapper_128, ArcFace, GFPGAN).

The real weights are not reachable here; these stand-ins exercise every line of the pipeline around them
(alignment, normalisation, batching > 1, emap extraction, paste-back) with outputs that really depend on their
inputs, so a wrong crop, channel order or normalisation changes the result.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from engines.models.registry import get_spec
from engines.models.store import ModelStore, sha256_file

OPSET = 17


def _save(graph: onnx.GraphProto, path: Path) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())
    return path


def inswapper_graph(path: Path, seed: int = 0) -> Path:
    """target [N,3,128,128] + source [N,512] -> output [N,3,128,128]; last initializer = emap (512x512).

    output = 0.5 * target + 0.5 * sigmoid(source @ emap @ W) per channel: the swapped face takes a colour
    from the source latent, so different sources give different faces.
    """
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.normal(0, 4.0, (512, 3)).astype(np.float32), "w_colour")
    shape = numpy_helper.from_array(np.array([0, 3, 1, 1], dtype=np.int64), "shape_n311")
    half = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half")
    emap = numpy_helper.from_array(rng.normal(0, 0.05, (512, 512)).astype(np.float32), "emap")
    nodes = [
        helper.make_node("MatMul", ["source", "emap"], ["mapped"]),
        helper.make_node("MatMul", ["mapped", "w_colour"], ["colour"]),
        helper.make_node("Sigmoid", ["colour"], ["colour01"]),
        helper.make_node("Reshape", ["colour01", "shape_n311"], ["colour4d"]),
        helper.make_node("Mul", ["colour4d", "half"], ["colour_half"]),
        helper.make_node("Mul", ["target", "half"], ["target_half"]),
        helper.make_node("Add", ["target_half", "colour_half"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "inswapper_128_standin",
        [
            helper.make_tensor_value_info("target", TensorProto.FLOAT, ["N", 3, 128, 128]),
            helper.make_tensor_value_info("source", TensorProto.FLOAT, ["N", 512]),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 3, 128, 128])],
        initializer=[w, shape, half, emap],
    )
    return _save(graph, path)


def arcface_graph(path: Path, seed: int = 1) -> Path:
    """input.1 [N,3,112,112] -> 683 [N,512]: a coarse 4x4 colour layout, projected."""
    rng = np.random.default_rng(seed)
    proj = numpy_helper.from_array(rng.normal(0, 1.0, (48, 512)).astype(np.float32), "proj")
    flat = numpy_helper.from_array(np.array([0, 48], dtype=np.int64), "shape_n48")
    nodes = [
        helper.make_node("AveragePool", ["input.1"], ["pooled"], kernel_shape=[28, 28], strides=[28, 28]),
        helper.make_node("Reshape", ["pooled", "shape_n48"], ["flat"]),
        helper.make_node("MatMul", ["flat", "proj"], ["683"]),
    ]
    graph = helper.make_graph(
        nodes,
        "arcface_standin",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["N", 3, 112, 112])],
        [helper.make_tensor_value_info("683", TensorProto.FLOAT, ["N", 512])],
        initializer=[proj, flat],
    )
    return _save(graph, path)


def gfpgan_graph(path: Path) -> Path:
    """input [N,3,512,512] in [-1,1] -> output same: tanh(2x), a strong contrast boost that stays in range."""
    two = numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two")
    nodes = [
        helper.make_node("Mul", ["input", "two"], ["scaled"]),
        helper.make_node("Tanh", ["scaled"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "gfpgan_standin",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 512, 512])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 3, 512, 512])],
        initializer=[two],
    )
    return _save(graph, path)


def copy_embedded_models(store: ModelStore, real: ModelStore) -> None:
    """Put the provisioned detector and landmarker into a test's own model dir (hash-checked by `add`)."""
    for mid in ("retinaface_mnet025", "facemesh_468"):
        src = real.require(mid)
        store.add(get_spec(mid), src, sha256_file(src))
