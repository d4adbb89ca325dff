"""HTTPS on the gateway's port: WHIP and WHEP over TLS with an operator's certificate (through the front
process, which terminates TLS), and the self-signed development mode that says what it is."""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import numpy as np
import pytest

from gateway.http.tls import make_self_signed
from loadgen.embedded import free_port
from loadgen.processes import stop_process
from tests.harness.peers import publish, view
from tests.harness.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def _gateway(extra: list[str]) -> AsyncIterator[tuple[subprocess.Popen[bytes], int]]:
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
        "--event-log",
        "none",
        *extra,
    ]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        yield proc, port
    finally:
        stop_process(proc, 20)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()


async def _until(check: Callable[[], object], http: aiohttp.ClientSession, url: str, timeout: float) -> bool:
    """True once `url` answers 200; False when `check()` says the process is gone, or on timeout."""

    async def status() -> int | None:
        try:
            async with http.get(url, timeout=aiohttp.ClientTimeout(total=2)) as r:
                return r.status
        except (aiohttp.ClientError, TimeoutError):
            return None

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if await status() == 200:
            return True
        if check():
            return False
        await asyncio.sleep(0.2)
    return False


async def test_whip_and_whep_over_https_with_the_operators_certificate(
    tmp_path: Path, model_store: object, astronaut: np.ndarray
) -> None:
    import cv2

    tls = make_self_signed(tmp_path, "127.0.0.1")  # stands in for a CA-issued pair: the client trusts it
    trusting = ssl.create_default_context(cafile=str(tls.cert))
    async with _gateway(["--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]) as (proc, port):
        base = f"https://127.0.0.1:{port}"
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trusting)) as http:
            assert await _until(lambda: proc.poll() is not None, http, base + "/readyz", 90), "never ready"
            async with http.get(base + "/demo") as r:
                assert r.status == 200 and "<html" in (await r.text()).lower()
            publisher = await publish(http, base, [cv2.resize(astronaut, (160, 120))])
            viewer = None
            try:
                assert await wait_for(lambda: len(publisher.received.ids) >= 5, 30), "no frames back"
                session_id = publisher.location.rstrip("/").rsplit("/", 1)[-1]
                viewer = await view(
                    http, base, session_id, publisher.sender_track.sent if publisher.sender_track else None
                )
                assert await wait_for(lambda: len(viewer.received.ids) >= 5, 30), "WHEP viewer got nothing"
                location = publisher.location
                url = location if location.startswith("https://") else base + location
                async with http.delete(url) as r:
                    assert r.status in (200, 204)
            finally:
                if viewer is not None:
                    await viewer.close()
                await publisher.close()
        # plain HTTP on the TLS port gets no answer; an unverified certificate is refused by a client
        async with aiohttp.ClientSession() as plain:
            with pytest.raises(aiohttp.ClientError):
                async with plain.get(f"http://127.0.0.1:{port}/healthz") as r:
                    await r.read()
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                async with plain.get(base + "/healthz") as r:
                    await r.read()


async def test_self_signed_mode_serves_https_and_says_it_is_for_development(model_store: object) -> None:
    async with _gateway(["--self-signed", "--no-front-process"]) as (proc, port):
        base = f"https://127.0.0.1:{port}"
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as http:
            assert await _until(lambda: proc.poll() is not None, http, base + "/healthz", 60), "never live"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert proc.stderr is not None
        stderr = proc.stderr.read().decode()
    assert "DEVELOPMENT ONLY" in stderr and "self-signed" in stderr, stderr
    assert f"listening on https://127.0.0.1:{port}" in stderr, stderr


def test_a_key_that_does_not_match_the_certificate_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.cli import main

    first = make_self_signed(tmp_path / "a", "127.0.0.1")
    second = make_self_signed(tmp_path / "b", "127.0.0.1")
    assert main(["--tls-cert", str(first.cert), "--tls-key", str(second.key), "--event-log", "none"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be used" in err, err
    assert main(["--tls-cert", str(first.cert), "--event-log", "none"]) == 2
    assert "--tls-cert and --tls-key go together" in capsys.readouterr().err
