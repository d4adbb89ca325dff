"""TritonEngine against a real tritonserver (the nvidia-pytriton wheel) on 127.0.0.1.

Outputs through Triton must equal in-process ONNX Runtime for every model the repository serves, over plain
gRPC and over system shared memory; errors are one clear EngineError; a killed server gives errors (never a
hang or a crash) and a restarted one is used again without rebuilding the engine.
Tolerance: 1e-4 absolute (+1e-4 relative) — the same ONNX on the same ONNX Runtime, only thread counts differ.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest

from engines.backends.onnxruntime_engine import OrtConfig, OrtEngine
from engines.backends.triton_engine import TritonConfig, TritonEngine
from engines.engine import EngineError, run_batched
from engines.models.store import ModelStore
from engines.triton.server import TritonProcess
from loadgen.embedded import free_port
from tests.harness.triton_server import build_repository, grpc_url, start_triton

ATOL = RTOL = 1e-4


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, model_store: ModelStore) -> Path:
    return build_repository(tmp_path_factory.mktemp("triton") / "repo", model_store.root)


@pytest.fixture(scope="module")
def triton(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    work = tmp_path_factory.mktemp("triton-run")
    server = start_triton(repo, work / "triton.log", work)
    yield server
    server.stop()


def _inputs(name: str, astronaut: np.ndarray) -> dict[str, np.ndarray]:
    """Real images, batch 3, in each model's layout (NCHW float)."""
    if name == "face_detector":
        img = cv2.resize(astronaut, (320, 320)).astype(np.float32) - 117.0
        x = np.stack([img, img[::-1], img[:, ::-1]]).transpose(0, 3, 1, 2)
        return {"input": np.ascontiguousarray(x)}
    img = cv2.resize(astronaut[40:260, 140:360], (192, 192)).astype(np.float32) / 255.0
    x = np.stack([img, img * 0.8, img[:, ::-1]]).transpose(0, 3, 1, 2)
    return {"input_1": np.ascontiguousarray(x)}


@pytest.mark.parametrize("shm", [False, True], ids=["grpc", "shm"])
@pytest.mark.parametrize("name", ["face_detector", "face_landmarker"])
def test_outputs_equal_in_process_ort(
    triton: TritonProcess, repo: Path, astronaut: np.ndarray, name: str, shm: bool
) -> None:
    local = OrtEngine(repo / name / "1" / "model.onnx", OrtConfig(max_batch=8), name=name)
    remote = TritonEngine(name, TritonConfig(url=grpc_url(triton), shm=shm))
    try:
        assert [s.name for s in remote.inputs] == [s.name for s in local.inputs]
        assert [s.name for s in remote.outputs] == [s.name for s in local.outputs]
        assert remote.batch.max == 8
        feeds = _inputs(name, astronaut)
        want = local.infer(feeds)
        for _ in range(2):  # the second call reuses the shm slot
            got = remote.infer(feeds)
            assert set(got) == set(want)
            for k in want:
                assert got[k].shape == want[k].shape, k
                np.testing.assert_allclose(got[k], want[k], atol=ATOL, rtol=RTOL, err_msg=k)
        # a batch above the server's max is split by run_batched into requests Triton accepts
        big = {k: np.concatenate([v] * 4) for k, v in feeds.items()}  # 12 > 8
        got = run_batched(remote, big)
        np.testing.assert_allclose(
            got[local.outputs[0].name][9:12], want[local.outputs[0].name], atol=ATOL, rtol=RTOL
        )
    finally:
        remote.close()
        remote.close()  # idempotent
        local.close()


def test_clear_errors(triton: TritonProcess) -> None:
    t0 = time.monotonic()
    with pytest.raises(EngineError, match="unreachable"):
        TritonEngine("face_detector", TritonConfig(url=f"127.0.0.1:{free_port()}", connect_timeout_s=0.5))
    assert time.monotonic() - t0 < 10
    with pytest.raises(EngineError, match="not ready"):
        TritonEngine("no_such_model", TritonConfig(url=grpc_url(triton), connect_timeout_s=0.3))
    engine = TritonEngine("face_landmarker", TritonConfig(url=grpc_url(triton)))
    try:
        with pytest.raises(EngineError, match="model expects"):
            engine.infer({"input_1": np.zeros((1, 3, 128, 128), np.float32)})
        with pytest.raises(EngineError, match="do not match"):
            engine.infer({"image": np.zeros((1, 3, 192, 192), np.float32)})
        with pytest.raises(EngineError, match="batch 9 outside"):
            engine.infer({"input_1": np.zeros((9, 3, 192, 192), np.float32)})
        engine.close()
        with pytest.raises(EngineError, match="closed"):
            engine.infer({"input_1": np.zeros((1, 3, 192, 192), np.float32)})
    finally:
        engine.close()
    with pytest.raises(ValueError, match="HOST:PORT"):
        TritonConfig(url="localhost")


@pytest.mark.parametrize("shm", [False, True], ids=["grpc", "shm"])
def test_server_killed_and_restarted(repo: Path, tmp_path: Path, shm: bool) -> None:
    server = start_triton(repo, tmp_path / "triton.log", tmp_path)
    engine = TritonEngine("face_landmarker", TritonConfig(url=grpc_url(server), shm=shm, timeout_s=5))
    x = {"input_1": np.random.default_rng(0).random((2, 3, 192, 192), dtype=np.float32)}
    try:
        before = engine.infer(x)
        assert engine.is_ready()
        server.kill()
        t0 = time.monotonic()
        with pytest.raises(EngineError, match="unreachable"):
            engine.infer(x)
        assert time.monotonic() - t0 < 6, "a vanished server must fail fast, not hang"
        time.sleep(1.1)  # past the readiness cache
        assert not engine.is_ready()
        server.start()
        server.wait_ready(120)
        deadline = time.monotonic() + 15
        after = None
        while after is None and time.monotonic() < deadline:
            try:
                after = engine.infer(x)  # same engine object: the channel reconnects, shm re-registers
            except EngineError:
                time.sleep(0.2)
        assert after is not None, "engine did not recover after the server came back"
        for k in before:
            np.testing.assert_allclose(after[k], before[k], atol=ATOL, rtol=RTOL)
    finally:
        engine.close()
        server.stop()


def test_dns_url_balances_over_every_address(triton: TritonProcess) -> None:
    """The form the Kubernetes manifests use for a headless Service (`dns:///name:port`, round robin)."""
    engine = TritonEngine(
        "face_landmarker",
        TritonConfig(url=f"dns:///localhost:{triton.config.grpc_port}", connect_timeout_s=10),
    )
    try:
        out = engine.infer({"input_1": np.zeros((1, 3, 192, 192), np.float32)})
        assert out["conv2d_20"].shape == (1, 1404, 1, 1)
    finally:
        engine.close()
