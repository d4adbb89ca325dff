"""`make fuzz` / `make soak` in miniature, as benchmark-marked tests (excluded from `make test`): the script
against a real gateway subprocess with the real pipeline, a live session and tenants."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.benchmark, pytest.mark.models]  # the gateway subprocess loads the real pipeline


def _run(tmp_path: Path, *args: str) -> dict[str, object]:
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.fuzz_gateway", *args, "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report: dict[str, object] = json.loads(out.read_text())
    return report


def test_fuzz_round_has_no_5xx_and_live_session_survives(tmp_path: Path) -> None:
    report = _run(
        tmp_path,
        "fuzz",
        "--requests",
        "1500",
        "--rate",
        "100",
        "--quiet",
        "8",
        "--gateway-rate-limit",
        "10000",
    )  # every endpoint reached, not 429
    (round_,) = report["rounds"]  # type: ignore[misc]
    assert round_["fuzz"]["five_xx"] == 0
    assert round_["live"]["received"] > 0 and report["gateway_alive_at_end"]


def test_kill9_cycles_restart_cleanly(tmp_path: Path) -> None:
    report = _run(tmp_path, "kill9", "--cycles", "2", "--live-s", "3")
    assert all(c["frames_before_kill"] > 0 for c in report["cycles"])  # type: ignore[union-attr]


def test_short_soak(tmp_path: Path) -> None:
    report = _run(tmp_path, "soak", "--duration", "40", "--rate", "20")
    assert report["fuzz"]["five_xx"] == 0  # type: ignore[index]
    assert report["gateway_alive_at_end"]
