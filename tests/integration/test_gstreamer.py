"""An independent WebRTC stack publishes to the gateway: GStreamer's `webrtcbin` (libnice ICE, OpenSSL DTLS
with an RSA certificate), the element behind `whipsink` / `whipclientsink`. Before, it got 201 and
then died in DTLS ("no shared cipher"). The publisher runs as a subprocess of Debian's system Python, which
has the GObject bindings (python3-gi); `.ci/run` installs the packages. Everything stays on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import aiohttp
import cv2
import numpy as np
import pytest

from bench.interop_clients import GST_PACKAGES, SYSTEM_PYTHON, gstreamer_missing
from gateway.monitoring.records import Outcome
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import source_query

PUBLISHER = Path(__file__).resolve().parents[1] / "harness" / "gst_whip_publisher.py"


@pytest.fixture(scope="module")
def gstreamer() -> None:
    why = gstreamer_missing()
    if why is None:
        return
    message = f"{why}: apt-get install {GST_PACKAGES}"
    if os.environ.get("CI") == "true":  # CI installs them (.ci/run): missing there is a failure, not a skip
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


async def test_gstreamer_webrtcbin_publisher_connects_and_gets_processed_video(
    gstreamer: None, astronaut: np.ndarray
) -> None:
    monitor = RecordingMonitor()
    async with (
        running_gateway(gw_config(), pipeline=FakePipeline(), monitor=monitor) as gw,
        aiohttp.ClientSession() as http,
    ):
        query = await source_query(http, gw.url, cv2.resize(astronaut, (320, 240)))
        proc = await asyncio.create_subprocess_exec(
            SYSTEM_PYTHON,
            str(PUBLISHER),
            f"{gw.url}/whip{query}",
            "--seconds",
            "6",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        lines = [line for line in out.decode().splitlines() if line.startswith("{")]
        assert lines, (proc.returncode, out.decode()[-2000:], err.decode()[-3000:])
        result = json.loads(lines[-1])
        assert not result["errors"] and proc.returncode == 0, (result, err.decode()[-3000:])
        closed = dict(monitor.closed_sessions)
    assert result["status"] == 201
    # aiortc's own role: we are the DTLS client, and our ClientHello offers ECDHE-RSA suites for its RSA key
    assert result["answer_setup"] == "active"
    assert result["connection_state"] == "connected"  # DTLS completed (webrtcbin's state needs it)
    assert result["frames_sent"] >= 60 and result["frames_received"] >= 30, result
    assert result["received_caps"] == [320, 240]
    r, g, b = result["corner_rgb"]
    assert r > 180 and g < 60 and b > 180, result  # the gateway's test pipeline painted it: processed video
    processed = [rec for rec in monitor.records if rec.outcome is Outcome.PROCESSED]
    assert len(processed) >= 30
    assert list(closed.values()) == ["deleted by client"], closed
