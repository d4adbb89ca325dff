"""The `gateway` console script as a real process: liveness at once, readiness once models are warm, and on
SIGTERM / SIGINT: refuse new sessions, close every peer, exit 0."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import numpy as np
import pytest

from loadgen.embedded import free_port
from tests.harness.peers import publish
from tests.harness.waiting import http_status, wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def gateway_process(model_store: object) -> AsyncIterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "gateway.cli",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ice-loopback-only",
        "--shutdown-grace-s",
        "3",
        "--log-level",
        "WARNING",
    ]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_signal_refuses_new_sessions_closes_peers_and_exits_0(
    gateway_process: tuple[subprocess.Popen[bytes], str], astronaut: np.ndarray, sig: signal.Signals
) -> None:
    import cv2

    proc, base = gateway_process
    async with aiohttp.ClientSession() as http:
        assert await _wait_status(http, base + "/healthz", 200, 30), "never became live"
        assert await _wait_status(http, base + "/readyz", 200, 60), "never became ready (models warm)"
        client = await publish(http, base, [cv2.resize(astronaut, (160, 120))])
        try:
            assert await wait_for(lambda: len(client.received.ids) >= 5, 30)
            closed = asyncio.Event()

            @client.pc.on("connectionstatechange")
            def on_state() -> None:
                if client.pc.connectionState in ("closed", "failed"):
                    closed.set()

            proc.send_signal(sig)
            # while draining the server still answers: readiness off, new sessions refused
            assert await _wait_status(http, base + "/readyz", 503, 2)
            async with http.post(
                base + "/whip", data="v=0\r\n", headers={"Content-Type": "application/sdp"}
            ) as r:
                assert r.status == 503 and "Retry-After" in r.headers
                assert "shutting down" in await r.text()
            # the gateway closed our peer connection (DTLS close): no frames arrive any more
            await asyncio.wait_for(closed.wait(), 10)
        finally:
            await client.close()
        t0 = time.monotonic()
        rc = await asyncio.get_running_loop().run_in_executor(None, proc.wait, 20)
        assert time.monotonic() - t0 < 20
    assert proc.stderr is not None
    stderr = proc.stderr.read().decode()
    assert rc == 0, stderr
    assert "Traceback" not in stderr, stderr


async def _wait_status(http: aiohttp.ClientSession, url: str, want: int, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if await http_status(http, url) == want:
            return True
        await asyncio.sleep(0.1)
    return False


async def test_drain_keeps_live_sessions_until_they_end_then_exits(
    model_store: object, astronaut: np.ndarray
) -> None:
    """--drain-grace-s: on SIGTERM new sessions are refused at once, a live one keeps its media until its
    publisher ends it, and the gateway then exits without waiting out the grace."""
    import cv2

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = [
        sys.executable,
        "-m",
        "gateway.cli",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ice-loopback-only",
        "--drain-grace-s",
        "120",
        "--event-log",
        "none",
    ]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        async with aiohttp.ClientSession() as http:
            assert await _wait_status(http, base + "/readyz", 200, 90), "never became ready"
            client = await publish(http, base, [cv2.resize(astronaut, (160, 120))])
            try:
                assert await wait_for(lambda: len(client.received.ids) >= 5, 30)
                proc.send_signal(signal.SIGTERM)
                assert await _wait_status(http, base + "/readyz", 503, 5)
                async with http.post(
                    base + "/whip", data="v=0\r\n", headers={"Content-Type": "application/sdp"}
                ) as r:
                    assert r.status == 503 and "shutting down" in await r.text()
                # the live session still gets its processed frames while the gateway drains
                before = len(client.received.ids)
                assert await wait_for(lambda: len(client.received.ids) >= before + 15, 30), "media stopped"
                assert proc.poll() is None
                async with http.delete(base + client.location) as r:
                    assert r.status in (200, 204)
            finally:
                await client.close()
        t0 = time.monotonic()
        rc = await asyncio.get_running_loop().run_in_executor(None, proc.wait, 60)
        assert time.monotonic() - t0 < 30  # not the 120 s grace: the last session ended
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.stderr is not None
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert rc == 0, stderr
    assert "draining: waiting up to 120 s" in stderr and "Traceback" not in stderr, stderr
