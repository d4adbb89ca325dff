"""Triton pieces that need no server: config.pbtxt rendering, server command/environment, error lines,
input checks, and the engine watch's event bookkeeping."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engines.backends.triton_engine import check_inputs, describe_error
from engines.engine import BatchRange, EngineError, TensorSpec
from engines.triton.repository import RepositoryConfig, TensorDecl, decls_from_onnx, render_config
from engines.triton.server import TritonServerConfig, WheelLayout, server_command, server_env
from gateway.engine_watch import ENGINE_RECOVERED, ENGINE_UNAVAILABLE, EngineWatch


def test_render_config_has_batching_instances_and_backend() -> None:
    ins = (TensorDecl("input", "TYPE_FP32", (3, -1, -1)),)
    outs = (TensorDecl("loc", "TYPE_FP32", (-1, 4)),)
    text = render_config(
        "face_detector",
        ins,
        outs,
        RepositoryConfig("onnxruntime", 16, (8, 4), 1500, 2, "KIND_GPU", gpus=(0,)),
    )
    assert 'name: "face_detector"' in text and 'backend: "onnxruntime"' in text
    assert "max_batch_size: 16" in text and "dims: [ 3, -1, -1 ]" in text
    assert "preferred_batch_size: [ 4, 8 ]" in text and "max_queue_delay_microseconds: 1500" in text
    assert "count: 2" in text and "kind: KIND_GPU" in text and "gpus: [ 0 ]" in text
    assert "intra_op_threads" not in text
    plan = render_config("m", ins, outs, RepositoryConfig("tensorrt", 8, (4,), 0, 1, "KIND_GPU"))
    assert 'platform: "tensorrt_plan"' in plan
    py = render_config("m", ins, outs, RepositoryConfig("python", 8, (4,), 0, 1, "KIND_CPU", 3))
    assert 'backend: "python"' in py and 'string_value: "3"' in py


@pytest.mark.parametrize(
    "kwargs",
    [
        {"backend": "tf"},
        {"max_batch": 4, "preferred_batch_sizes": (8,)},
        {"kind": "KIND_TPU"},
        {"instances": 0},
    ],
)
def test_repository_config_rejects_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RepositoryConfig(**kwargs)  # type: ignore[arg-type]


def test_decls_from_real_onnx(model_store: object) -> None:
    path = model_store.require("retinaface_mnet025")  # type: ignore[attr-defined]
    ins, outs = decls_from_onnx(path)
    assert ins == (TensorDecl("input", "TYPE_FP32", (3, -1, -1)),)
    assert [o.name for o in outs] == ["loc", "conf", "landmarks"]


def test_server_command_and_env(tmp_path: Path) -> None:
    layout = WheelLayout(
        tmp_path / "bin/tritonserver",
        tmp_path / "lib.so",
        tmp_path / "utils.py",
        tmp_path / "stub",
        tmp_path / "libs",
    )
    config = TritonServerConfig(tmp_path / "repo", 9001, 9000, 9002)
    cmd = server_command(layout, config, tmp_path / "backends")
    assert cmd[0].endswith("tritonserver")
    assert f"--model-repository={tmp_path / 'repo'}" in cmd and "--grpc-port=9001" in cmd
    assert f"--backend-directory={tmp_path / 'backends'}" in cmd and "--strict-readiness=true" in cmd
    env = server_env(layout, {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/x"}, Path("/venv/bin"))
    assert env["PATH"].startswith("/venv/bin:") and env["LD_LIBRARY_PATH"] == f"{tmp_path / 'libs'}:/x"
    with pytest.raises(ValueError):
        TritonServerConfig(tmp_path, grpc_port=0)


class _Exc(Exception):
    def __init__(self, status: str, msg: str) -> None:
        super().__init__(msg)
        self._s, self._m = status, msg

    def status(self) -> str:
        return self._s

    def message(self) -> str:
        return self._m


def test_error_lines_say_what_happened() -> None:
    url = "10.0.0.1:8001"
    assert "unreachable" in describe_error(_Exc("StatusCode.UNAVAILABLE", "failed to connect"), url, "m")
    assert "timed out" in describe_error(_Exc("StatusCode.DEADLINE_EXCEEDED", "Deadline Exceeded"), url, "m")
    assert "not ready" in describe_error(_Exc("StatusCode.NOT_FOUND", "unknown model"), url, "m")
    assert describe_error(_Exc("StatusCode.INTERNAL", "boom\nstack"), url, "m") == f"triton at {url}: m: boom"


def test_check_inputs() -> None:
    specs = (TensorSpec("x", "FP32", ("batch", 3, 4)),)
    assert check_inputs("m", specs, {"x": np.zeros((2, 3, 4), np.float32)}, BatchRange(1, 4)) == 2
    with pytest.raises(EngineError, match="model expects"):
        check_inputs("m", specs, {"x": np.zeros((2, 3, 5), np.float32)}, BatchRange(1, 4))
    with pytest.raises(EngineError, match="rank"):
        check_inputs("m", specs, {"x": np.zeros((2, 3), np.float32)}, BatchRange(1, 4))


def test_engine_watch_emits_one_event_per_transition() -> None:
    events: list[tuple[str, list[str]]] = []
    watch = EngineWatch(lambda: [], lambda kind, msg, **d: events.append((kind, d["engines"])))
    watch.observe([])
    watch.observe(["face_detector", "face_landmarker"])
    watch.observe(["face_landmarker", "face_detector"])  # same set: nothing new
    assert watch.down == ("face_detector", "face_landmarker")
    watch.observe(["face_landmarker"])
    watch.observe([])
    assert events == [
        (ENGINE_UNAVAILABLE, ["face_detector", "face_landmarker"]),
        (ENGINE_RECOVERED, ["face_detector"]),
        (ENGINE_RECOVERED, ["face_landmarker"]),
    ]
