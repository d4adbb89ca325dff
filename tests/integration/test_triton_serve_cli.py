"""`python -m engines.triton serve`: starts the wheel's tritonserver on a repository, answers Triton's own
readiness, stops cleanly on SIGTERM; a missing wheel or repository is one line and exit 2."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engines.models.store import ModelStore
from engines.triton import server as triton_server
from engines.triton.server import TritonServerError, http_ready, locate_wheel
from loadgen.embedded import free_ports
from tests.harness.triton_server import build_repository

ROOT = Path(__file__).resolve().parents[2]


def test_serve_starts_ready_and_stops_on_sigterm(tmp_path: Path, model_store: ModelStore) -> None:
    repo = build_repository(tmp_path / "repo", model_store.root, models=("face_landmarker",))
    grpc, http, metrics = free_ports(3)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engines.triton",
            "serve",
            "--model-repository",
            str(repo),
            "--grpc-port",
            str(grpc),
            "--http-port",
            str(http),
            "--metrics-port",
            str(metrics),
            "--log-file",
            str(tmp_path / "triton.log"),
            "--work-dir",
            str(tmp_path / "work"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("triton ready"):
                break
        assert lines and lines[-1].startswith("triton ready"), "".join(lines)
        assert http_ready("127.0.0.1", http)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert not http_ready("127.0.0.1", http)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_missing_repository_is_one_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "engines.triton", "serve", "--model-repository", str(tmp_path / "nope")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "model repository not found" in out.stderr


def test_missing_wheel_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    assert locate_wheel().binary.is_file()
    monkeypatch.setattr(triton_server.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(TritonServerError, match="pip install --no-deps 'nvidia-pytriton"):
        locate_wheel()
