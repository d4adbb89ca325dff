"""The gateway as real processes (gateway.front): the CLI serves HTTP from a front process at a lower
priority; it is restarted when it dies, it dies with the media process, and what it refuses still shows in
the media process's monitor."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import psutil
import pytest

from loadgen.embedded import free_port
from loadgen.processes import stop_process
from tests.harness.waiting import http_status, until

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "front-test-token"
FRONT_CPU = min(os.sched_getaffinity(0))  # one CPU of those this test may use


def _answers(http: aiohttp.ClientSession, url: str, want: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await http_status(http, url) == want

    return check


def _fronts(pid: int) -> list[psutil.Process]:
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    return [c for c in children if "gateway.front" in " ".join(c.cmdline())]


@pytest.fixture
async def gateway(model_store: object, tmp_path: Path) -> AsyncIterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    argv = [
        sys.executable, "-m", "gateway.cli", "--host", "127.0.0.1", "--port", str(port),
        "--ice-loopback-only", "--processors", "none", f"--token={TOKEN}", "--log-level", "WARNING",
        f"--front-cpus={FRONT_CPU}",
    ]  # fmt: skip
    with open(tmp_path / "gateway.log", "wb") as log:
        proc = subprocess.Popen(
            argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        yield proc, port
    finally:
        fronts = _fronts(proc.pid)
        stop_process(proc, 20)
        for front in fronts:  # a test that failed half-way must not leave one holding the port
            if front.is_running():
                front.kill()


async def test_front_serves_at_lower_priority_reports_refusals_restarts_and_dies_with_the_gateway(
    gateway: tuple[subprocess.Popen[bytes], int],
) -> None:
    proc, port = gateway
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as http:
        assert await until(_answers(http, base + "/readyz", 200), 60), "never ready"
        [front] = _fronts(proc.pid)
        gateway_nice = psutil.Process(proc.pid).nice()
        assert front.nice() == min(19, gateway_nice + 5)  # 5 below the gateway (the ceiling is 19)
        assert front.cpu_affinity() == [FRONT_CPU]  # --front-cpus, every thread of it
        assert {tuple(psutil.Process(t.id).cpu_affinity()) for t in front.threads()} == {(FRONT_CPU,)}

        # refused in front, counted in the media process's monitor (reported once a second)
        sdp = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/sdp"}
        async with http.post(base + "/whip", data="v=0\r\n", headers=sdp) as r:
            assert r.status == 400

        async def counted() -> bool:
            async with http.get(base + "/api/stats", params={"token": TOKEN}) as r:
                return bool((await r.json())["rejects"].get("bad_request", 0) >= 1)

        assert await until(counted, 10), "the front's refusal never reached /api/stats"

        # a front that dies is replaced, on the same listening socket
        front.kill()
        assert await until(_answers(http, base + "/healthz", 200), 15)
        [second] = _fronts(proc.pid)
        assert second.pid != front.pid
        async with http.get(base + "/api/stats", params={"token": TOKEN}) as r:
            shown = (await r.json())["front"]
        assert (shown["running"], shown["pid"], shown["restarts"]) == (True, second.pid, 1)
        assert shown["nice"] == min(19, psutil.Process(proc.pid).nice() + 5)  # below the media process
        assert shown["cpus"] == [FRONT_CPU] and second.cpu_affinity() == [FRONT_CPU]  # the restart too
        async with http.get(base + "/metrics") as r:
            assert "livefuse_front_restarts_total 1.0" in await r.text()

    # ... and it does not outlive the media process, even one killed with SIGKILL
    proc.kill()
    proc.wait(10)
    end = time.monotonic() + 10
    while second.is_running() and second.status() != psutil.STATUS_ZOMBIE and time.monotonic() < end:
        await asyncio.sleep(0.1)
    assert not second.is_running() or second.status() == psutil.STATUS_ZOMBIE
    with socket.socket() as s:  # the port is free again: a restarted gateway can bind it
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))


async def test_no_front_process_serves_from_the_media_process(model_store: object, tmp_path: Path) -> None:
    port = free_port()
    argv = [
        sys.executable, "-m", "gateway.cli", "--host", "127.0.0.1", "--port", str(port),
        "--ice-loopback-only", "--processors", "none", "--no-front-process", "--log-level", "WARNING",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        async with aiohttp.ClientSession() as http:
            assert await until(_answers(http, f"http://127.0.0.1:{port}/healthz", 200), 30)
        assert _fronts(proc.pid) == []
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
