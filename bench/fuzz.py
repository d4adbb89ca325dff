"""An attacker's view of the gateway, bounded, on loopback; only bench.fuzz_gateway prints or exits.

`run_fuzz` sends the cases (bench.fuzz_cases, mutated from `real_offer`) and counts answers (every 5xx with
its request; 503 + Retry-After apart). `cost_by_kind` measures the gateway's CPU per request of each kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bench.fuzz_cases import FuzzCase
from bench.probes import process_cpu_s
from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig
from loadgen.percentiles import percentile


@dataclass
class FuzzResult:
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    by_kind: dict[str, Counter[int]] = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)  # "kind METHOD path -> status: first line"
    transport_errors: Counter[str] = field(default_factory=Counter)  # closed by the server, timeouts
    duration_s: float = 0.0

    @property
    def five_xx(self) -> int:
        """Server errors: every 5xx except 503 (refusal with Retry-After when full)."""
        return sum(n for s, n in self.statuses.items() if s >= 500 and s != 503)

    def add(self, case: FuzzCase, status: int, text: str) -> None:
        self.requests += 1
        self.statuses[status] += 1
        self.by_kind.setdefault(case.kind, Counter())[status] += 1
        if status >= 500 and status != 503 and len(self.server_errors) < 50:
            self.server_errors.append(f"{case.kind} {case.method} {case.path[:80]} -> {status}: {text[:120]}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "by_kind": {
                k: {str(s): n for s, n in sorted(c.items())} for k, c in sorted(self.by_kind.items())
            },
            "five_xx": self.five_xx,
            "server_errors": self.server_errors,
            "transport_errors": dict(self.transport_errors),
            "duration_s": round(self.duration_s, 2),
        }


async def real_offer(audio: bool = True) -> str:
    """A real aiortc offer (audio if asked, then video; loopback candidates): what the SDP cases mutate."""
    pc = create_peer_connection(IceConfig.loopback_only())
    if audio:
        pc.addTransceiver("audio", direction="sendrecv")
    pc.addTransceiver("video", direction="sendrecv")
    await pc.setLocalDescription(await pc.createOffer())
    sdp = str(pc.localDescription.sdp)
    await pc.close()
    return sdp


# --- running ---
async def _send_raw(host: str, port: int, raw: bytes, timeout_s: float) -> tuple[int | None, str]:
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    try:
        writer.write(raw)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout_s)
        if not line:
            return None, "closed"
        parts = line.split()
        return (
            (int(parts[1]), line.decode("latin-1").strip())
            if len(parts) >= 2 and parts[1].isdigit()
            else (None, "odd")
        )
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def run_fuzz(
    url: str,
    cases: list[FuzzCase],
    *,
    concurrency: int = 8,
    timeout_s: float = 20.0,
    rate_per_s: float | None = None,
) -> FuzzResult:
    """Send every case (at most `concurrency` at a time, at most `rate_per_s` started per second)."""
    result = FuzzResult()
    host, port = url.split("//", 1)[1].split(":")
    queue: asyncio.Queue[FuzzCase] = asyncio.Queue()
    for case in cases:
        queue.put_nowait(case)
    start = time.monotonic()
    started = 0
    timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def worker(http: aiohttp.ClientSession) -> None:
        nonlocal started
        while True:
            try:
                case = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            if rate_per_s:
                started += 1
                due = start + started / rate_per_s
                await asyncio.sleep(max(0.0, due - time.monotonic()))
            try:
                if case.raw is not None:
                    status, text = await _send_raw(host, int(port), case.raw, timeout_s)
                    if status is None:
                        result.transport_errors[f"raw {text}"] += 1
                        continue
                    result.add(case, status, text)
                    continue
                async with http.request(
                    case.method,
                    url + case.path,
                    data=case.body or None,
                    headers=dict(case.headers),
                    timeout=timeout,
                ) as r:
                    if r.headers.get("Content-Type", "").startswith("text/event-stream"):
                        text = ""
                    else:
                        text = (await r.read())[:200].decode("utf-8", "replace")
                    result.add(case, r.status, text)
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                result.transport_errors[f"{case.kind} {type(exc).__name__}"] += 1

    connector = aiohttp.TCPConnector(limit=concurrency, force_close=True)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as http:
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))
    result.duration_s = time.monotonic() - start
    return result


@dataclass
class KindCost:
    kind: str
    requests: int
    cpu_ms_per_request: float  # the gateway's CPU (all threads), idle rate subtracted
    wall_ms_p50: float
    wall_ms_max: float
    statuses: dict[str, int]
    after_cpu_pct: float  # gateway CPU in the `settle_s` after the last request (sessions left to reap, ...)
    other_cpu_ms_per_request: float | None = None  # `other_pid`'s (the front process), idle subtracted
    cpu_ms_by_status: dict[str, float] = field(default_factory=dict)  # per request, by the answer's status
    cpu_ms_top: dict[str, float] = field(default_factory=dict)  # the costliest "METHOD path status" (n >= 3)

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


async def cost_by_kind(
    url: str,
    pid: int,
    cases: list[FuzzCase],
    *,
    settle_s: float = 3.0,
    timeout_s: float = 20.0,
    other_pid: int | None = None,
) -> list[KindCost]:
    """Send each kind's cases sequentially (one connection at a time, no overlap) and charge the gateway's
    CPU time over that span to the kind. Kinds run in the order they first appear; `settle_s` of quiet
    follows each kind (measured as `after_cpu_pct`) so that work a kind leaves behind (pending sessions'
    ICE checks) does not land on the next one."""

    def other_cpu_s() -> float:
        return process_cpu_s(other_pid) if other_pid is not None else 0.0

    t0, c0, o0 = time.monotonic(), process_cpu_s(pid), other_cpu_s()
    await asyncio.sleep(settle_s)
    idle_rate = (process_cpu_s(pid) - c0) / (time.monotonic() - t0)
    other_idle_rate = (other_cpu_s() - o0) / (time.monotonic() - t0)
    by_kind: dict[str, list[FuzzCase]] = {}
    for case in cases:
        by_kind.setdefault(case.kind, []).append(case)
    costs = []
    for kind, group in by_kind.items():
        result = FuzzResult()
        walls = []
        per_status: dict[str, list[float]] = {}
        per_target: dict[str, list[float]] = {}
        start, cpu0, other0 = time.monotonic(), process_cpu_s(pid), other_cpu_s()
        for case in group:
            w0, r0 = time.monotonic(), process_cpu_s(pid)
            before = Counter(result.statuses)
            await _send_one(url, case, result, timeout_s)
            wall = time.monotonic() - w0
            walls.append(wall * 1000.0)
            status = next(iter(result.statuses - before), "none")
            spent = (process_cpu_s(pid) - r0 - idle_rate * wall) * 1000.0  # in clock ticks: right on average
            per_status.setdefault(str(status), []).append(spent)
            per_target.setdefault(f"{case.method} {case.path.split('?')[0][:40]} {status}", []).append(spent)
        span, cpu = time.monotonic() - start, process_cpu_s(pid) - cpu0
        other = other_cpu_s() - other0
        a0, ac0 = time.monotonic(), process_cpu_s(pid)
        await asyncio.sleep(settle_s)
        after = (process_cpu_s(pid) - ac0) / (time.monotonic() - a0)
        costs.append(
            KindCost(
                kind=kind,
                requests=len(group),
                cpu_ms_per_request=1000.0 * max(0.0, cpu - idle_rate * span) / len(group),
                wall_ms_p50=percentile(walls, 50),
                wall_ms_max=max(walls),
                statuses={str(k): v for k, v in sorted(result.statuses.items())},
                after_cpu_pct=100.0 * after,
                other_cpu_ms_per_request=(
                    None
                    if other_pid is None
                    else 1000.0 * max(0.0, other - other_idle_rate * span) / len(group)
                ),
                cpu_ms_top=dict(
                    sorted(
                        ((k, round(sum(v) / len(v), 2)) for k, v in per_target.items() if len(v) >= 3),
                        key=lambda kv: -kv[1],
                    )[:6]
                ),
                cpu_ms_by_status={
                    k: round(max(0.0, sum(v) / len(v)), 2) for k, v in sorted(per_status.items())
                },
            )
        )
    return costs


async def _send_one(url: str, case: FuzzCase, result: FuzzResult, timeout_s: float) -> None:
    host, port = url.split("//", 1)[1].split(":")
    try:
        if case.raw is not None:
            status, text = await _send_raw(host, int(port), case.raw, timeout_s)
            if status is None:
                result.transport_errors[f"raw {text}"] += 1
            else:
                result.add(case, status, text)
            return
        connector = aiohttp.TCPConnector(force_close=True)
        async with (
            aiohttp.ClientSession(connector=connector, auto_decompress=False) as http,
            http.request(
                case.method,
                url + case.path,
                data=case.body or None,
                headers=dict(case.headers),
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as r,
        ):
            text = (
                ""
                if r.headers.get("Content-Type", "").startswith("text/event-stream")
                else (await r.read())[:200].decode("utf-8", "replace")
            )
            result.add(case, r.status, text)
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        result.transport_errors[f"{case.kind} {type(exc).__name__}"] += 1
