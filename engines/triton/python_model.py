"""Triton Python-backend model that runs `model.onnx` (beside this file's version dir) on ONNX Runtime.

Copied as `<repo>/<model>/1/model.py` by `engines.triton.repository` for CPU-only Triton builds. Requests of
one `execute` call with equal non-batch shapes are stacked into one ONNX Runtime run and the outputs split
back. Tensors cross the stub boundary through DLPack, not `as_numpy()`: the wheel's stub was built against
numpy 1, and with numpy 2 those return garbage. The stub's renaming of a consumed capsule is a harmless
unraisable error that `_quiet_capsule_rename` keeps out of Triton's log.

This file runs inside Triton's stub process and imports nothing from livefuse.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils  # provided by the Triton Python backend

_CAPSULE_RENAMED = "PyCapsule_GetPointer called with incorrect name"


def _quiet_capsule_rename(default: Any) -> Any:
    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, ValueError) and str(unraisable.exc_value) == _CAPSULE_RENAMED:
            return
        default(unraisable)

    return hook


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        sys.unraisablehook = _quiet_capsule_rename(sys.__unraisablehook__)
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        opts = ort.SessionOptions()
        threads = int(params.get("intra_op_threads", "0") or 0)
        if threads:
            opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        self.session = ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])
        self.inputs = [i["name"] for i in config["input"]]
        self.outputs = [o.name for o in self.session.get_outputs()]

    def execute(self, requests: list[Any]) -> list[Any]:
        responses: list[Any] = [None] * len(requests)
        groups: dict[tuple[tuple[int, ...], ...], list[tuple[int, dict[str, np.ndarray]]]] = {}
        for i, request in enumerate(requests):
            feeds = {n: np.from_dlpack(pb_utils.get_input_tensor_by_name(request, n)) for n in self.inputs}
            key = tuple(tuple(feeds[n].shape[1:]) for n in self.inputs)
            groups.setdefault(key, []).append((i, feeds))
        for members in groups.values():
            try:
                stacked = {
                    n: np.concatenate([f[n] for _, f in members]) if len(members) > 1 else members[0][1][n]
                    for n in self.inputs
                }
                results = self.session.run(self.outputs, stacked)
            except Exception as e:  # one failed group answers its requests with the error, others go on
                for i, _ in members:
                    responses[i] = pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e)))
                continue
            start = 0
            for i, feeds in members:
                n = int(feeds[self.inputs[0]].shape[0])
                tensors = [
                    pb_utils.Tensor.from_dlpack(name, np.ascontiguousarray(r[start : start + n]))
                    for name, r in zip(self.outputs, results, strict=True)
                ]
                responses[i] = pb_utils.InferenceResponse(output_tensors=tensors)
                start += n
        return responses

    def finalize(self) -> None:
        self.session = None
