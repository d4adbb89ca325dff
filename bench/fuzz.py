"""An attacker's view of the gateway, bounded, on loopback; only bench.fuzz_gateway prints or exits.

`generate_cases` (pure) mutates a real offer (`real_offer`) into malformed SDP, trickle fragments, image
bombs, bad headers and request lines (sent on a raw socket), huge bodies, every endpoint with every method.
`run_fuzz` sends them and counts answers (every 5xx with its request; 503 + Retry-After apart). `LiveProbe`
is one real publisher whose windows compare quiet and attacked time; `ProcessSampler` reads a pid's RSS, fds
and threads; `cost_by_kind` measures the gateway's CPU per request of each kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import struct
import time
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig
from loadgen.percentiles import percentile, percentiles
from loadgen.stats import Event, StatsCollector

SDP = "application/sdp"
TRICKLE = "application/trickle-ice-sdpfrag"
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PROPFIND")


@dataclass(frozen=True)
class FuzzCase:
    kind: str
    method: str
    path: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    raw: bytes | None = None  # sent as-is on a socket (bad request lines, non-UTF-8 headers)


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


# --- image bombs ---
def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bomb(width: int, height: int, rows: int | None = None) -> bytes:
    """A valid 1-bit greyscale PNG: tiny, but width*height*3 bytes once decoded to colour."""
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    comp = zlib.compressobj(9)
    row = b"\x00" * (1 + (width + 7) // 8)
    data = b"".join(comp.compress(row) for _ in range(height if rows is None else rows)) + comp.flush()
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")


def jpeg_header(width: int, height: int) -> bytes:
    sof = (
        b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    )
    return b"\xff\xd8" + sof + b"\xff\xd9"


@dataclass(frozen=True)
class Bombs:
    """Built once per run (the 20000x20000 PNG takes a second to compress)."""

    big_png: bytes
    header_png: bytes
    header_jpeg: bytes

    @classmethod
    def build(cls) -> Bombs:
        return cls(png_bomb(20000, 20000), png_bomb(65535, 65535, rows=0), jpeg_header(65500, 65500))


# --- SDP mutations ---
def _mutate_sdp(rng: random.Random, offer: str) -> bytes:
    lines = offer.split("\r\n")
    choice = rng.randrange(18)
    i = rng.randrange(len(lines))
    if choice == 0:
        del lines[i]
    elif choice == 1:
        lines.insert(i, lines[rng.randrange(len(lines))])
    elif choice == 2:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif choice == 3:
        return offer.encode()[: rng.randrange(len(offer))]
    elif choice == 4:
        lines[i] = rng.randbytes(rng.randint(1, 80)).decode("latin-1")
    elif choice == 5:
        lines = [ln for ln in lines if not ln.startswith("a=group:BUNDLE")]
        lines.insert(
            4, "a=group:BUNDLE " + " ".join(rng.choice(["-1", "0", "1", "7", "x", ""]) for _ in range(3))
        )
    elif choice == 6:
        lines = [ln for ln in lines if not ln.startswith("a=mid:") or rng.random() < 0.5]
    elif choice == 7:
        junk = rng.choice(["IN IP6 zz", "IN IP4 999.1.1.1", "IN", "IN IP4", "IN IP7 1.2.3.4", "IN IP4 ::1"])
        lines = [("c=" + junk if ln.startswith("c=") else ln) for ln in lines]
    elif choice == 8:
        lines = [
            (
                ln.split(" ")[0]
                + " "
                + rng.choice(["abc", "-1", "99999999999", ""])
                + " UDP/TLS/RTP/SAVPF 96"
                if ln.startswith("m=")
                else ln
            )
            for ln in lines
        ]
    elif choice == 9:
        lines.insert(i, "a=" + "x" * rng.choice([1000, 20000, 70000]))
    elif choice == 10:
        lines = [
            (
                f"a=rtpmap:{rng.choice(['96', 'x', '-5', '128'])} {rng.choice(['VP8', '', '/', 'H264/x'])}"
                if ln.startswith("a=rtpmap") and rng.random() < 0.5
                else ln
            )
            for ln in lines
        ]
        return "\r\n".join(lines).encode()
    elif choice == 11:
        return b"\xff\xfe" + offer.encode()[: rng.randrange(len(offer))] + b"\xc3\x28"
    elif choice == 12:
        return offer.replace("\r\n", "\n").encode()
    elif choice == 13:
        lines.insert(
            i,
            "a=candidate:"
            + " ".join(
                rng.choice(["1", "udp", "x", "999999999999", "host", "typ"])
                for _ in range(rng.randint(0, 12))
            ),
        )
    elif choice == 14:
        lines = [
            (f"a=setup:{rng.choice(['holdconn', '', 'x'])}" if ln.startswith("a=setup") else ln)
            for ln in lines
        ]
    elif choice == 15:
        lines = [
            (
                f"a=fingerprint:{rng.choice(['sha-999 AA', 'sha-256', ''])}"
                if ln.startswith("a=fingerprint")
                else ln
            )
            for ln in lines
        ]
    elif choice == 16:
        lines.insert(i, f"a=extmap:{rng.choice(['9999', '0', 'x'])} urn:x")
    else:
        lines.insert(
            i,
            rng.choice(
                [
                    "m=video 9 UDP/TLS/RTP/SAVPF",
                    "m=text 9 RTP/AVP 0",
                    "m=application 0 x",
                    "v=1",
                    "o=",
                    "b=AS:-1",
                    "a=ssrc:x",
                    "a=msid-semantic: WMS *" * 200,
                ]
            ),
        )
    return "\r\n".join(lines).encode("utf-8", "surrogateescape")


def _trickle(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randint(0, 6)):
        parts.append(
            rng.choice(
                [
                    "a=ice-ufrag:" + rng.choice(["abcd", "", "x" * 300]),
                    "a=ice-pwd:" + rng.choice(["0123456789abcdefghijkl", ""]),
                    "a=mid:" + rng.choice(["0", "1", "zz", ""]),
                    "a=candidate:1 1 udp 2130706431 127.0.0.1 "
                    + rng.choice(["9", "70000", "x", "-1"])
                    + " typ host",
                    "a=candidate:"
                    + " ".join(
                        rng.choice(["1", "udp", "x", "typ", "relay"]) for _ in range(rng.randint(0, 10))
                    ),
                    "a=end-of-candidates",
                    "m=video 9 RTP/AVP 0",
                    "garbage line",
                    rng.randbytes(20).decode("latin-1"),
                ]
            )
        )
    return "\r\n".join(parts).encode("utf-8", "surrogateescape")


def _raw(rng: random.Random, path: str, token: str | None) -> bytes:
    host = b"Host: 127.0.0.1\r\n"
    end = b"Connection: close\r\n\r\n"
    auth = f"Authorization: Bearer {token}\r\n".encode() if token else b""
    choice = rng.randrange(10)
    if choice == 0:
        return (
            b"DELETE "
            + path.encode()
            + b" HTTP/1.1\r\n"
            + host
            + b"Authorization: Bearer \xff\xfe\x80\r\n"
            + end
        )
    if choice == 1:
        return b"GET / HTTP/1.1\r\n" + host + b"X-Big: " + b"a" * rng.choice([9000, 70000]) + b"\r\n" + end
    if choice == 2:
        return (
            b"POST /whip HTTP/1.1\r\n"
            + host
            + auth
            + b"Content-Type: application/sdp\r\nContent-Length: -5\r\n"
            + end
        )
    if choice == 3:
        return b"POST /whip HTTP/1.1\r\n" + host + auth + b"Content-Length: 100\r\n" + end + b"v=0"
    if choice == 4:
        return (
            b"POST /sources HTTP/1.1\r\n"
            + host
            + auth
            + b"Transfer-Encoding: chunked\r\nContent-Type: image/png\r\n"
            + end
            + b"zz\r\n"
        )
    if choice == 5:
        return rng.randbytes(rng.randint(1, 200)) + b"\r\n\r\n"
    if choice == 6:
        return b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n" + host + end
    if choice == 7:
        return b"GET http://evil.example/whip HTTP/1.1\r\n" + host + end
    if choice == 8:
        return b"GET /sessions HTTP/1.1\r\n" + host + b"Authorization: \xc3\x28\r\nCookie: \xff\r\n" + end
    return (
        b"PATCH "
        + path.encode()
        + b" HTTP/1.1\r\n"
        + host
        + auth
        + b"Content-Type: "
        + TRICKLE.encode()
        + b"\r\nIf-Match: \xff\r\nContent-Length: 3\r\n"
        + end
        + b"a=x"
    )


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


def generate_cases(
    rng: random.Random,
    offer: str,
    n: int,
    *,
    bombs: Bombs,
    live_session: str | None = None,
    own_session: str | None = None,
    token: str | None = None,
    max_body_bytes: int = 8 * 1024 * 1024,
) -> Iterator[FuzzCase]:
    """`n` cases, a fixed mix of every kind; `token` is the fuzzer's own (a tenant's), used on most requests
    so the parsers behind authentication are reached too. The live session is only ever PATCHed (never
    deleted), and with fragments that carry no usable candidate; `own_session` (one the fuzzer's tenant
    created) gets real trickle fragments, so the parser behind the ownership check is reached too."""
    sid = live_session or "unknown-session"
    paths = [
        "/whip",
        f"/whip/{sid}",
        "/whip/nope",
        f"/whep/{sid}",
        f"/whep/{sid}/nope",
        "/sources",
        "/sources/nope",
        "/sessions",
        f"/sessions/{sid}",
        "/api/stats",
        "/metrics",
        "/dashboard",
        "/dashboard.js",
        "/demo",
        "/healthz",
        "/readyz",
        "/",
        "/nonexistent",
        "/whip/%00",
        "/../../etc/passwd",
        "/sources/..%2f",
    ]
    auth = (("Authorization", f"Bearer {token}"),) if token else ()
    for _ in range(n):
        pick = rng.random()
        who = auth if rng.random() < 0.8 else rng.choice([(), (("Authorization", "Bearer wrong"),)])
        if pick < 0.30:
            target = rng.choice(
                ["/whip", "/whip", f"/whep/{sid}", "/whip?processors=bogus", "/whip?source=x"]
            )
            yield FuzzCase("sdp", "POST", target, (("Content-Type", SDP), *who), _mutate_sdp(rng, offer))
        elif pick < 0.42:
            target = rng.choice([f"/whip/{sid}", "/whip/nope", f"/whip/{own_session or sid}"])
            well_formed = own_session is not None and target.endswith(own_session) and rng.random() < 0.8
            etag = "*" if well_formed else rng.choice(["*", '"nope"', ""])
            ctype = TRICKLE if well_formed else rng.choice([TRICKLE, SDP, "text/plain"])
            headers = (("Content-Type", ctype), ("If-Match", etag), *who)
            body = _trickle(rng)
            if target.endswith(sid) and b"a=candidate" in body:  # nothing connects the live peer elsewhere
                body = body.replace(b"a=candidate", b"a=x-candidate")
            yield FuzzCase("trickle", "PATCH", target, headers, body)
        elif pick < 0.52:
            kind = rng.randrange(8)
            if kind == 0:
                body = bombs.big_png
            elif kind == 1:
                body = bombs.header_png
            elif kind == 2:
                body = bombs.header_jpeg
            elif kind == 3:
                body = png_bomb(64, 64)[: rng.randint(8, 80)]
            elif kind == 4:
                body = b"RIFF\x00\x00\x00\x00WEBPVP8 " + rng.randbytes(30)
            elif kind == 5:
                body = rng.randbytes(rng.randint(0, 2000))
            elif kind == 6:
                body = b"\xff\xd8" + rng.randbytes(300)
            else:
                body = png_bomb(rng.randint(1, 3000), rng.randint(1, 3000))
            ctype = rng.choice(["image/png", "image/jpeg", "image/webp", "image/gif", ""])
            headers = ((("Content-Type", ctype),) if ctype else ()) + who
            yield FuzzCase("image", "POST", "/sources", headers, body)
        elif pick < 0.62:
            yield FuzzCase(
                "raw", "RAW", rng.choice(["/whip/nope", f"/whip/{sid}"]), raw=_raw(rng, "/whip/nope", token)
            )
        elif pick < 0.67:
            target = rng.choice(["/whip", "/sources", f"/whep/{sid}", "/whip/nope"])
            size = rng.choice([max_body_bytes + 1, 2 * max_body_bytes, 200_000])
            ctype = {"/whip": SDP, "/sources": "image/png"}.get(target, SDP)
            yield FuzzCase("huge", "POST", target, (("Content-Type", ctype), *who), b"v=0\r\n" + b"a" * size)
        else:
            method = rng.choice(METHODS)
            target = rng.choice(paths)
            if method == "DELETE" and sid in target:
                target = target.replace(
                    sid, "nope"
                )  # the live session must live (it is owned by another tenant anyway)
            ctype = rng.choice([SDP, TRICKLE, "image/png", "application/json", "text/plain", ""])
            body = rng.randbytes(rng.randint(0, 300)) if method not in ("GET", "HEAD", "OPTIONS") else b""
            headers = ((("Content-Type", ctype),) if ctype else ()) + who
            yield FuzzCase("endpoint", method, target, headers, body)


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


def runqueue_wait_s(pid: int) -> float:
    """Seconds the threads of `pid` alive now have spent runnable but waiting for a CPU
    (/proc/pid/task/*/schedstat, second field): how much the rest of the machine delays this process."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that just ended
    return total / 1e9


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of every thread of `pid` so far (/proc/pid/stat)."""
    fields_ = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields_[11]) + int(fields_[12])) / os.sysconf("SC_CLK_TCK")


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


# --- the live session ---
@dataclass
class LiveWindow:
    sent: int
    received: int
    fps: float
    p50_ms: float | None
    p95_ms: float | None
    loss: float  # frames sent that did not come back with a readable stamp
    unreadable: int = 0  # came back in the window, stamp unreadable (picture damaged where the stamp is)
    missing: int = 0  # never came back at all (dropped by the gateway or lost on the way)

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


class LiveProbe:
    """Collects a WhipJob's events (pass `emit` to it) in a loadgen StatsCollector and summarises any window
    of send times."""

    def __init__(self) -> None:
        self.stats = StatsCollector(budget_ms=float("inf"))  # no budget here: latencies are reported as-is

    def emit(self, event: Event) -> None:
        self.stats.record(event)

    @property
    def frames_received(self) -> int:
        return self.stats.window(float("-inf"), float("inf")).received

    def window(self, t0: float, t1: float) -> LiveWindow:
        return self.pooled([(t0, t1)])

    def pooled(self, spans: Sequence[tuple[float, float]]) -> LiveWindow:
        """The frames sent in any of `spans`, summarised as one window (e.g. the quiet before and after an
        attack, so that a drift over the run, such as the publisher's rate still climbing, cancels out)."""
        parts = [self.stats.window(t0, t1) for t0, t1 in spans]
        latencies = [(s.recv_t - s.sent_t) * 1000.0 for t0, t1 in spans for s in self.stats.samples(t0, t1)]
        sent, received = sum(w.sent for w in parts), sum(w.received for w in parts)
        unreadable = sum(w.unreadable for w in parts)
        span = max(sum(t1 - t0 for t0, t1 in spans), 1e-6)
        p50, p95 = percentiles(latencies, (50, 95)) if latencies else (None, None)
        return LiveWindow(
            sent=sent,
            received=received,
            fps=received / span,
            p50_ms=p50,
            p95_ms=p95,
            loss=1.0 - received / sent if sent else 0.0,
            unreadable=unreadable,
            missing=max(0, sent - received - unreadable),
        )


# --- the gateway process ---
@dataclass
class ProcSample:
    t: float
    rss_bytes: int
    fds: int
    threads: int


def sample_process(pid: int) -> ProcSample | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    except OSError:
        return None
    fields_ = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss = int(fields_.get("VmRSS", "0 kB").split()[0]) * 1024
    threads = int(fields_.get("Threads", "0").strip())
    return ProcSample(time.monotonic(), rss, fds, threads)


class ProcessSampler:
    """Samples a pid every `period_s` until stopped; `trend()` summarises start, end, max and slope."""

    def __init__(self, pid: int, period_s: float = 1.0) -> None:
        self.pid = pid
        self.period_s = period_s
        self.samples: list[ProcSample] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            sample = sample_process(self.pid)
            if sample is not None:
                self.samples.append(sample)
            await asyncio.sleep(self.period_s)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def trend(self) -> dict[str, Any]:
        if not self.samples:
            return {"samples": 0}
        t = np.array([s.t for s in self.samples]) - self.samples[0].t
        out: dict[str, Any] = {"samples": len(self.samples), "span_s": round(float(t[-1]), 1)}
        for name in ("rss_bytes", "fds", "threads"):
            v = np.array([getattr(s, name) for s in self.samples], dtype=float)
            slope = float(np.polyfit(t, v, 1)[0]) * 60.0 if len(v) >= 3 and t[-1] > 0 else 0.0
            out[name] = {
                "start": int(v[0]),
                "end": int(v[-1]),
                "max": int(v.max()),
                "per_min": round(slope, 1),
            }
        every = max(1, len(self.samples) // 30)  # about 30 points: enough to see a plateau or a climb
        out["series"] = [
            {
                "t_s": round(float(t[i]), 1),
                "rss_mb": round(x.rss_bytes / 2**20, 1),
                "fds": x.fds,
                "threads": x.threads,
            }
            for i, x in enumerate(self.samples)
            if i % every == 0 or i == len(self.samples) - 1
        ]
        return out
