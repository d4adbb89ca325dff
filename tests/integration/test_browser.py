"""The demo page in real headless Chromium (fake camera) against a real gateway, both inside a network
namespace with only `lo` (`unshare -n`), so WebRTC media can only flow over loopback. The fake camera shows
no face: the gateway must still stream, and keep streaming at the new size when the browser lowers its
sending resolution mid-stream; and transport-cc is negotiated with the browser
(gateway.webrtc.congestion.transport_cc)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.chromium import CHROMIUM

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed (apt-get install chromium)"
    ),
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None,
        reason="needs root, unshare and ip to make a loopback-only network namespace",
    ),
]


def test_demo_page_streams_and_follows_a_resolution_drop(model_store: object) -> None:
    probe = f"ip link set lo up && exec {sys.executable} -m tests.harness.browser_probe 60"
    done = subprocess.run(
        ["unshare", "-n", "sh", "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    result = json.loads(lines[-1])
    assert result["ok"], result
    before, after = result["before"], result["after"]
    assert before["connection"] == "connected" and before["framesReceived"] >= 30
    assert (before["width"], before["height"]) == (before["sentWidth"], before["sentHeight"]) == (640, 360)
    # the browser halved what it sends; processed frames keep arriving, at the size that came in
    assert (after["sentWidth"], after["sentHeight"]) == (320, 180)
    assert (after["width"], after["height"]) == (320, 180)
    assert after["framesReceived"] >= before["framesReceived"] + 30
    # the gateway's WHEP player page plays the same session's processed stream in another tab
    viewer = result["viewer"]
    assert viewer["connection"] == "connected" and viewer["framesReceived"] >= 30, viewer
    assert (viewer["width"], viewer["height"]) == (320, 180)
    # /demo?codec=H264 in a browser with no H.264 encoder: one line that says so, not InvalidModificationError
    no_h264 = result["no_h264"]
    assert no_h264.startswith("This browser cannot send H.264") and "\n" not in no_h264, no_h264
    (session,) = result["gateway"].values()
    assert session["frames_out"] > 0 and session["state"] == "connected"
    # Chromium offered transport-cc, got it in the answer, stamped its packets, and was sent their arrivals
    feedback = session["transport_cc"]
    # (every frame that came in came in stamped packets: at least one each, however slowly a busy machine ran)
    assert feedback is not None and feedback["packets_recorded"] >= session["frames_in"] > 0, session
    assert feedback["feedback_sent"] > 10, session
