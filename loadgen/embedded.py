"""An embedded gateway: the real `python -m gateway.cli` in a subprocess, for runs without --url.

Why a subprocess and not in-process: the gateway and the load generator must not share one event loop or one
GIL, or the measurement would include the generator's own encode/decode stalls. The gateway log goes to a file
(never a pipe that could fill and block it); its tail is quoted when the gateway fails to become ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiohttp import web


class GatewayStartError(RuntimeError):
    """The embedded gateway exited or never answered /readyz."""


@dataclass(frozen=True)
class EmbeddedGatewayConfig:
    budget_ms: float = 150.0
    max_batch: int | None = None
    engine: str | None = None
    providers: str | None = None
    processors: str | None = None
    token: str | None = None
    max_sessions: int | None = None
    degradation: bool = True  # off for capacity searches: measure the full-quality pipeline
    log_level: str = "warning"
    ready_timeout_s: float = 90.0
    stop_timeout_s: float = 10.0
    python: str = sys.executable
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    def argv(self, port: int) -> list[str]:
        args = [
            self.python,
            "-m",
            "gateway.cli",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--ice-loopback-only",
            "--budget-ms",
            f"{self.budget_ms:g}",
            "--log-level",
            self.log_level,
        ]
        optional = {
            "--max-batch": self.max_batch,
            "--engine": self.engine,
            "--providers": self.providers,
            "--processors": self.processors,
            "--token": self.token,
            "--max-sessions": self.max_sessions,
        }
        if not self.degradation:
            args.append("--no-degradation")
        for flag, value in optional.items():
            if value is not None:
                args.append(f"{flag}={value}")  # one word: a token may start with "-"
        return args + list(self.extra_args)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, for a process started later to bind (prefer `start_site` in-process:
    there is no window in which another process could take it)."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports: each socket stays bound until all are picked (calling `free_port` again
    may hand back the port it just released)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


async def start_site(runner: web.AppRunner, host: str = "127.0.0.1") -> int:
    """Start a set-up `runner` on a port the OS picks; that port."""
    await web.TCPSite(runner, host, 0).start()
    return int(runner.addresses[-1][1])


class EmbeddedGateway:
    """Start with `await start()`, use `.url`, end with `await stop()` (idempotent). Also an async context."""

    def __init__(self, config: EmbeddedGatewayConfig, cwd: Path | None = None) -> None:
        self.config = config
        self.cwd = cwd
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_file: tempfile._TemporaryFileWrapper[bytes] | None = None
        self.returncode: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, chars: int = 2000) -> str:
        if self._log_file is None:
            return ""
        try:
            return Path(self._log_file.name).read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    async def start(self) -> str:
        self.port = free_port()
        self._log_file = tempfile.NamedTemporaryFile(prefix="livefuse-gateway-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            self.config.argv(self.port),
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.cwd,
        )
        deadline = time.monotonic() + self.config.ready_timeout_s
        async with aiohttp.ClientSession() as http:
            while True:
                code = self.proc.poll()
                if code is not None:
                    self.returncode = code
                    raise GatewayStartError(f"gateway exited with {code} before ready:\n{self.log_tail()}")
                with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                    async with http.get(f"{self.url}/readyz", timeout=aiohttp.ClientTimeout(total=2)) as r:
                        if r.status == 200:
                            return self.url
                if time.monotonic() > deadline:
                    await self.stop()
                    raise GatewayStartError(
                        f"gateway not ready within {self.config.ready_timeout_s:g}s:\n{self.log_tail()}"
                    )
                await asyncio.sleep(0.25)

    async def stop(self) -> int | None:
        """SIGTERM, wait, then SIGKILL. Returns the exit code."""
        proc = self.proc
        if proc is None:
            return self.returncode
        self.proc = None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + self.config.stop_timeout_s
            while proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            if proc.poll() is None:
                proc.kill()
                await asyncio.to_thread(proc.wait)
        self.returncode = proc.returncode
        if self._log_file is not None:
            self._log_file.close()
            if self.returncode in (0, -signal.SIGTERM):  # a clean stop: nothing worth keeping
                Path(self._log_file.name).unlink(missing_ok=True)
        return self.returncode

    async def __aenter__(self) -> EmbeddedGateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
