"""The media process's side of the front process (gateway.front): bind, spawn, wait for ready, restart, stop.

`bind_listener` binds the public address here, in the media process, so a port in use is the same one-line
start-up error as before, and the socket outlives any one front process: a restarted front serves the same
socket, and connections that arrive in between wait in its backlog instead of being refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pickle
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from gateway.front.config import DRAIN_SIGNAL, FrontConfig

logger = logging.getLogger("gateway.front")

PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # where `gateway` imports from, installed or not
RESTART_DELAYS_S = (0.5, 1.0, 2.0, 5.0)  # the last repeats while it keeps dying


class FrontStartError(RuntimeError):
    """The front process exited or did not say ready in time (one line)."""


def bind_listener(host: str, port: int, backlog: int = 128) -> socket.socket:
    """A listening TCP socket on (host, port), as aiohttp's TCPSite would bind it (SO_REUSEADDR)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


class FrontProcess:
    """`await start()` (raises FrontStartError), then it keeps one front process alive until `await stop()`.
    `on_rejects` gets each report's counts by reason, on the event loop."""

    def __init__(
        self,
        config: FrontConfig,
        listener: socket.socket,
        media_socket: str,
        on_rejects: Callable[[dict[str, int]], None],
        ready_timeout_s: float = 30.0,
    ) -> None:
        self.config = config
        self._listener = listener
        self._media_socket = media_socket
        self._on_rejects = on_rejects
        self._ready_timeout_s = ready_timeout_s
        self._proc: asyncio.subprocess.Process | None = None
        self._watch: asyncio.Task[None] | None = None
        self._stopping = False
        self._draining = False
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    async def start(self) -> None:
        self._proc = await self._spawn()
        self._watch = asyncio.get_running_loop().create_task(self._keep_alive(), name="front-process")

    async def _spawn(self) -> asyncio.subprocess.Process:
        fd = self._listener.fileno()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway.front",
            "--listen-fd",
            str(fd),
            "--media-socket",
            self._media_socket,
            "--parent",
            str(os.getpid()),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            pass_fds=(fd,),
            env=env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(pickle.dumps(self.config))
        with contextlib.suppress(ConnectionError):
            await proc.stdin.drain()
        proc.stdin.close()
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), self._ready_timeout_s)
        except TimeoutError:
            await _end(proc, 2.0)
            raise FrontStartError(f"front process not ready within {self._ready_timeout_s:g} s") from None
        if line.strip() != b"ready":
            code = await _end(proc, 2.0)
            raise FrontStartError(f"front process exited with code {code} before it was ready (see its log)")
        if self._draining:
            _signal(proc, DRAIN_SIGNAL)
        return proc

    def drain(self) -> None:
        """The gateway is shutting down: the front refuses POST/PATCH/PUT with 503 itself from now on, as
        the media process does, whatever the body (a restarted front is told again)."""
        self._draining = True
        if self._proc is not None:
            _signal(self._proc, DRAIN_SIGNAL)

    async def _keep_alive(self) -> None:
        failures = 0
        while not self._stopping:
            proc = self._proc
            assert proc is not None and proc.stdout is not None
            while line := await proc.stdout.readline():
                self._report(line)
            code = await proc.wait()
            if self._stopping:
                return
            delay = RESTART_DELAYS_S[min(failures, len(RESTART_DELAYS_S) - 1)]
            logger.error("front process %d exited with code %s: restarting in %g s", proc.pid, code, delay)
            await asyncio.sleep(delay)
            try:
                self._proc = await self._spawn()
                self.restarts += 1
                failures = 0
                logger.warning("front process restarted as %d", self._proc.pid)
            except (FrontStartError, OSError) as exc:
                failures += 1
                logger.error("front process restart failed: %s", exc)

    def _report(self, line: bytes) -> None:
        try:
            counts = json.loads(line)
        except ValueError:
            return
        if isinstance(counts, dict):
            self._on_rejects({str(k): int(v) for k, v in counts.items() if isinstance(v, int) and v > 0})

    async def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM, wait `timeout_s`, then SIGKILL. Idempotent."""
        self._stopping = True
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        if self._proc is not None:
            await _end(self._proc, timeout_s)


def _signal(proc: asyncio.subprocess.Process, sig: int) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


async def _end(proc: asyncio.subprocess.Process, timeout_s: float) -> int | None:
    if proc.returncode is None:
        _signal(proc, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    return proc.returncode
