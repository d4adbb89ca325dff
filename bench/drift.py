"""Does a long run drift? N publishers for N minutes against an embedded gateway, in 5-minute windows.

    python -m bench.drift --minutes 60 --jobs 3 --resolution 320x240 --fps 15 --output reports/drift.json

A live show runs for hours: the same load must not cost more the older the sessions are. Each window holds
latency, losses and drops, CPU per frame of the gateway and of this load generator apart, RSS, threads and
the machine's speed (bench.machine_probe); `bench.drift_windows.verdict` (pure) compares the first 10 minutes
after warm-up with the last 10 and fits the RSS slope of the last 30 (docs/BENCHMARKS.md "Long runs: drift").
Its own bookkeeping is bounded whatever the duration: fixed-size latency histograms per window, a frame not
back within `lost_after_s` counted lost and forgotten, process samples folded into their window.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from bench.drift_windows import DriftTargets, FrameBook, Window, format_report, verdict
from loadgen.arguments import parse_resolution
from loadgen.client import ClientConfig, JoinError, WhipJob, upload_source
from loadgen.embedded import EmbeddedGateway, EmbeddedGatewayConfig, GatewayStartError
from loadgen.media import default_media_dir, media_path
from loadgen.synth import SynthConfig, build_loop

MB = 1e6


@dataclass
class ProcessCpu:
    """CPU seconds, RSS and threads of a process tree (a gateway and its front/pool children)."""

    pid: int

    def read(self) -> tuple[float, float, int] | None:
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return None
        cpu = rss = 0.0
        threads = 0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                cpu += t.user + t.system + t.children_user + t.children_system
                rss += p.memory_info().rss / MB
                if p.pid == self.pid:
                    threads = p.num_threads()
        return cpu, rss, threads


def _own() -> tuple[float, float, int]:
    me = psutil.Process()
    t = me.cpu_times()
    return t.user + t.system, me.memory_info().rss / MB, me.num_threads()


async def _gateway_counters(http: aiohttp.ClientSession, url: str) -> dict[str, float] | None:
    try:
        async with http.get(f"{url}/api/stats", timeout=aiohttp.ClientTimeout(total=5)) as r:
            if r.status != 200:
                return None
            stats = await r.json()
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
        return None
    frames = stats.get("frames") or {}
    dropped = frames.get("dropped") or {}
    p95 = ((stats.get("latency") or {}).get("server_ms") or {}).get("p95")
    sessions = (stats.get("sessions") or {}).get("list") or []
    return {
        "send_kbps": float(sum(x.get("send_kbps") or 0 for x in sessions)),
        "received": float(frames.get("received") or 0),
        "stale": float(dropped.get("stale") or 0),
        "deadline": float(dropped.get("deadline") or 0),
        "server_p95": float(p95 or 0.0),
    }


class MachineProbe:
    """bench.machine_probe in a child process (at this process's priority): its CPU ms per probe go into
    the window open when they arrive, so CPU per frame can be read against the machine's own speed."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.window: Window | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.machine_probe", "--interval", str(self.interval_s),
            stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        async for line in self._proc.stdout:
            parts = line.split()
            if len(parts) == 2 and self.window is not None:
                with contextlib.suppress(ValueError):
                    self.window.probe_ms.append(float(parts[1]))

    async def stop(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.terminate()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._proc.wait(), 5)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader


async def run(args: argparse.Namespace) -> dict[str, Any]:
    w, h = parse_resolution(args.resolution)
    media = default_media_dir(os.environ)
    loop = build_loop(SynthConfig(w, h, args.fps), media)
    gateway = EmbeddedGateway(EmbeddedGatewayConfig(extra_args=tuple(args.gateway_arg or ())))
    await gateway.start()
    assert gateway.proc is not None
    gw_proc = ProcessCpu(gateway.proc.pid)
    book = FrameBook(args.lost_after_s)
    probe = MachineProbe(args.probe_s)
    jobs: list[WhipJob] = []
    windows: list[Window] = []
    window_s = args.window_minutes * 60.0
    rss_keep = max(3, int(DriftTargets().rss_span_s / args.sample_s) + 2)
    gw_rss: deque[tuple[float, float]] = deque(maxlen=rss_keep)
    lg_rss: deque[tuple[float, float]] = deque(maxlen=rss_keep)
    try:
        async with aiohttp.ClientSession() as http:
            config = ClientConfig(url=gateway.url, loopback_only=True)
            source = await upload_source(http, config, media_path(media, "astronaut.png"))
            config = ClientConfig(url=gateway.url, loopback_only=True, source_id=source)
            for i in range(args.jobs):
                job = WhipJob(i, config, loop, args.fps, book.record, http)
                await job.start()
                jobs.append(job)
            if args.probe_s > 0:
                await probe.start()
            await asyncio.sleep(args.warmup_minutes * 60.0)
            t0 = time.monotonic()
            n_windows = max(1, math.ceil(args.minutes / args.window_minutes))
            prev_gw = await _gateway_counters(http, gateway.url)
            prev_gw_cpu = gw_proc.read()
            prev_own = _own()
            for index in range(n_windows):
                window = Window(index, index * window_s, (index + 1) * window_s)
                windows.append(window)
                book.window = probe.window = window
                end = t0 + window.end_s
                while (now := time.monotonic()) < end:
                    await asyncio.sleep(min(args.sample_s, end - now))
                    now = time.monotonic()
                    book.expire(now)
                    counters = await _gateway_counters(http, gateway.url)
                    if counters is not None and prev_gw is not None:
                        window.gateway_frames += int(counters["received"] - prev_gw["received"])
                        window.stale += int(counters["stale"] - prev_gw["stale"])
                        window.deadline += int(counters["deadline"] - prev_gw["deadline"])
                        window.server_p95_ms.append(counters["server_p95"])
                        window.send_kbps.append(counters["send_kbps"])
                    prev_gw = counters if counters is not None else prev_gw
                    gw = gw_proc.read()
                    if gw is not None and prev_gw_cpu is not None:
                        window.gateway_cpu_s += gw[0] - prev_gw_cpu[0]
                        window.gateway_rss_mb.append(gw[1])
                        window.gateway_threads.append(gw[2])
                        gw_rss.append((now - t0, gw[1]))
                    prev_gw_cpu = gw if gw is not None else prev_gw_cpu
                    own = _own()
                    window.loadgen_cpu_s += own[0] - prev_own[0]
                    window.loadgen_rss_mb.append(own[1])
                    window.loadgen_threads.append(own[2])
                    window.loadgen_py_blocks.append(sys.getallocatedblocks())
                    lg_rss.append((now - t0, own[1]))
                    prev_own = own
                    window.load_1m.append(os.getloadavg()[0])
                if args.progress:
                    print(json.dumps(window.to_dict()), file=sys.stderr, flush=True)
                if args.output:  # a partial report after every window: a long run can be read while it runs
                    _write(args, windows, gw_rss, lg_rss, final=False)
            book.window = probe.window = None
            await asyncio.sleep(args.lost_after_s + 0.5)
            book.expire(time.monotonic() + args.lost_after_s + 1.0)
    finally:
        await probe.stop()
        await asyncio.gather(*(j.stop() for j in jobs), return_exceptions=True)
        code = await gateway.stop()
    report = _write(args, windows, gw_rss, lg_rss, final=True)
    report["gateway_exit_code"] = code
    return report


def _write(
    args: argparse.Namespace,
    windows: Sequence[Window],
    gw_rss: Sequence[tuple[float, float]],
    lg_rss: Sequence[tuple[float, float]],
    final: bool,
) -> dict[str, Any]:
    report = {
        "benchmark": "drift",
        "final": final,
        "args": {k: v for k, v in vars(args).items() if k != "output"},
        "cpus": os.cpu_count(),
        "windows": [w.to_dict() for w in windows],
        "verdict": verdict(windows, list(gw_rss), list(lg_rss), DriftTargets()),
    }
    if args.output:
        path = Path(args.output)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(report, indent=1))
        tmp.replace(path)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.drift", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="measured minutes after warm-up")
    parser.add_argument("--warmup-minutes", type=float, default=2.0)
    parser.add_argument("--window-minutes", type=float, default=5.0)
    parser.add_argument("--jobs", type=int, default=3, help="WHIP publishers")
    parser.add_argument("--resolution", default="320x240")
    parser.add_argument("--fps", type=float, default=15.0)
    parser.add_argument("--sample-s", type=float, default=10.0, help="process and /api/stats sampling")
    parser.add_argument(
        "--probe-s",
        type=float,
        default=10.0,
        help="machine speed probe interval (bench.machine_probe; 0: off)",
    )
    parser.add_argument("--lost-after-s", type=float, default=5.0, help="a frame not back by then is lost")
    parser.add_argument("--gateway-arg", action="append", help="extra gateway flag (repeatable)")
    parser.add_argument("--output", help="JSON report (rewritten after every window)")
    parser.add_argument("--progress", action="store_true", help="each window's record on stderr")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.window_minutes <= 0 or args.jobs < 1 or args.sample_s <= 0:
        parser.error("--minutes, --window-minutes, --sample-s must be > 0 and --jobs >= 1")
    try:
        report = asyncio.run(run(args))
    except (JoinError, GatewayStartError, OSError, aiohttp.ClientError) as exc:
        print(f"drift: {exc}", file=sys.stderr)
        return 2
    print(format_report(report))
    return {False: 0, True: 1, None: 3}[report["verdict"]["drift"]]


if __name__ == "__main__":
    sys.exit(main())
