#!/usr/bin/env python3
"""The gateway against the stock aiortc example-server design, both running the same `Pipeline`.

For each design the same load generator searches the capacity (`loadgen.capacity`: step up, then bisect,
within the frame-return and p95 budgets). Designs, each a subprocess with its own CPU time: `gateway`,
`stock-executor` and `stock-inline` (`bench.stock_server`). Per point: p50/p95 end to end, frames
back, and the server's CPU ms per processed frame; a table and JSON (`--output`), loopback only, bounded.

    python -m bench.vs_stock --resolution 320x240 --output reports/bench_vs_stock_320x240.json
    python -m bench.vs_stock --quick --output reports/bench_vs_stock_quick.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from bench.vs_stock_compare import (
    DesignResult,
    Point,
    ServerSample,
    compare,
    format_table,
    server_window,
)
from loadgen.arguments import parse_resolution
from loadgen.capacity import (
    CapacityConfig,
    CapacitySearch,
    PointMeasurement,
    PointResult,
    WindowMeasure,
)
from loadgen.client import ClientConfig, upload_source
from loadgen.embedded import EmbeddedGateway, EmbeddedGatewayConfig
from loadgen.fingerprint import host_fingerprint
from loadgen.media import default_media_dir, media_path
from loadgen.report import clean, loadgen_run_entry
from loadgen.runner import RunConfig, run_point
from loadgen.stats import WindowSummary
from loadgen.synth import FrameLoop, SynthConfig, build_loop

REPO = Path(__file__).resolve().parents[1]

DESIGNS: tuple[str, ...] = ("gateway", "stock-executor", "stock-inline")
SCHEMA_VERSION = 1


def _get(d: Any, *path: str) -> Any:
    for key in path:
        d = d.get(key) if isinstance(d, dict) else None
    return d


def _processed(snapshot: dict[str, Any]) -> int | None:
    frames = snapshot.get("frames")
    value = frames.get("processed") if isinstance(frames, dict) else None
    return int(value) if isinstance(value, int | float) else None


@dataclass(frozen=True)
class StockServerConfig(EmbeddedGatewayConfig):
    """Starts bench.stock_server through loadgen's EmbeddedGateway (same readiness and stopping)."""

    mode: str = "executor"

    def argv(self, port: int) -> list[str]:
        return [
            self.python,
            "-m",
            "bench.stock_server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--mode",
            self.mode,
            *self.extra_args,
        ]


@dataclass(frozen=True)
class BenchConfig:
    width: int = 320
    height: int = 240
    fps: float = 15.0
    test_case: str = "single_face"
    designs: tuple[str, ...] = DESIGNS
    capacity: CapacityConfig = field(default_factory=lambda: CapacityConfig(start=2, step=2, max_jobs=16))
    jobs: tuple[int, ...] = ()  # fixed points instead of a search
    window_s: float = 5.0
    warmup_s: float = 2.0
    max_time_per_design_s: float = 600.0
    gateway_args: tuple[str, ...] = ()


def server_config(design: str, config: BenchConfig) -> EmbeddedGatewayConfig:
    max_jobs = max((*config.jobs, config.capacity.max_jobs))
    if design == "gateway":
        return EmbeddedGatewayConfig(
            budget_ms=config.capacity.budget_ms,
            degradation=False,
            max_sessions=max_jobs,
            extra_args=config.gateway_args,
        )
    if design.startswith("stock-"):
        return StockServerConfig(mode=design.removeprefix("stock-"))
    raise ValueError(f"unknown design {design!r} (one of {', '.join(DESIGNS)})")


def _busy(t: Any) -> float:
    """Busy CPU seconds of the whole machine from psutil.cpu_times(): everything but idle, iowait and steal
    (another guest's time); guest time is already inside user on Linux."""
    skip = ("idle", "iowait", "steal", "guest", "guest_nice")
    return float(sum(getattr(t, f) for f in t._fields if f not in skip))


async def _sample_server(url: str, pid: int, out: list[ServerSample], interval_s: float = 0.5) -> None:
    """The server's processed-frame counter and its CPU time, read at (nearly) the same instant."""
    proc, me = psutil.Process(pid), psutil.Process()
    async with aiohttp.ClientSession() as http:
        while True:
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError, ValueError):
                async with http.get(url + "/api/stats", timeout=aiohttp.ClientTimeout(total=3)) as r:
                    snapshot = await r.json(content_type=None) if r.status == 200 else None
                processed = _processed(snapshot) if isinstance(snapshot, dict) else None
                try:
                    t = proc.cpu_times()
                except psutil.Error:
                    return
                c, m = me.cpu_times(), psutil.cpu_times()
                if processed is not None:
                    assert isinstance(snapshot, dict)
                    sched = snapshot.get("scheduler")
                    wait = _get(snapshot, "latency", "stages_ms", "queue_wait", "p50")
                    out.append(
                        ServerSample(
                            time.monotonic(),
                            t.user + t.system,
                            processed,
                            sched if isinstance(sched, dict) else {},
                            float(wait) if isinstance(wait, int | float) else None,
                            c.user + c.system,
                            _busy(m),
                        )
                    )
            await asyncio.sleep(interval_s)


async def measure_point(
    url: str, pid: int, frames: FrameLoop, client: ClientConfig, config: BenchConfig, jobs: int, name: str
) -> tuple[Point, dict[str, Any]]:
    cap = config.capacity
    point = PointMeasurement(jobs, cap)

    def enough(windows: list[WindowSummary]) -> bool:
        w = windows[-1]
        point.add(WindowMeasure(w.latency.p95, w.received_ratio))
        return point.done

    run = RunConfig(
        concurrent_jobs=jobs,
        fps=config.fps,
        budget_ms=cap.budget_ms,
        warmup_s=config.warmup_s,
        window_s=config.window_s,
        max_measure_s=config.window_s * cap.max_windows,
    )
    samples: list[ServerSample] = []
    sampler = asyncio.ensure_future(_sample_server(url, pid, samples))
    try:
        result = await run_point(url, frames, run, client, None, enough)
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
    if not point.windows:
        point.add(WindowMeasure(result.summary.latency.p95, result.summary.received_ratio))
    pr = point.result()
    # p50 over the same stable windows the decision used
    stable = result.windows[-cap.stable_windows :] if result.windows else []
    p50s = [w.latency.p50 for w in stable if w.latency.p50 is not None]
    span = server_window(samples, result.measure_start, result.measure_end + run.drain_s)
    cpu_ms = fps = None
    if span is not None:
        cpu_ms, fps = span.cpu_ms_per_frame, span.processed_fps
    p = Point(
        jobs,
        sum(p50s) / len(p50s) if p50s else None,
        pr.p95_ms,
        pr.received_ratio,
        pr.ok,
        pr.stable,
        cpu_ms,
        fps,
        span,
    )
    meta = {
        "test_case": config.test_case,
        "resolution": f"{config.width}x{config.height}",
        "fps": config.fps,
        "concurrent_jobs": jobs,
        "batch_size": None,
    }
    entry = loadgen_run_entry(name, result, meta)
    entry["capacity_point"] = p.to_dict()
    return p, entry


async def measure_design(
    design: str,
    config: BenchConfig,
    frames: FrameLoop,
    source_image: Path,
    runs: list[dict[str, Any]],
    log: Callable[[str], None],
) -> DesignResult:
    res = DesignResult(design)
    server = EmbeddedGateway(server_config(design, config), cwd=REPO)
    try:
        url = await server.start()
    except Exception as exc:  # noqa: BLE001 - reported per design, the other designs still run
        res.error = str(exc).splitlines()[0]
        return res
    try:
        assert server.proc is not None
        pid = server.proc.pid
        client = ClientConfig(url=url)
        async with aiohttp.ClientSession() as http:
            client = replace(client, source_id=await upload_source(http, client, source_image))
        deadline = time.monotonic() + config.max_time_per_design_s
        search = CapacitySearch(config.capacity)
        fixed = list(config.jobs)
        while True:
            n = fixed.pop(0) if config.jobs and fixed else (None if config.jobs else search.next_jobs())
            if n is None:
                break
            if time.monotonic() > deadline:
                res.timed_out = True
                break
            name = f"{design}-{config.width}x{config.height}-n{n}"
            p, entry = await measure_point(url, pid, frames, client, config, n, name)
            entry["design"] = design
            runs.append(entry)
            res.points.append(p)
            if not config.jobs:
                search.report(PointResult(p.jobs, p.p95_ms, p.received_ratio, p.stable, 0, p.ok))
            extra = ""
            if p.server is not None and p.server.dispatch_reasons:
                extra = (
                    f" queue_wait p50 {p.server.queue_wait_p50_ms} ms, batches by reason "
                    f"{p.server.dispatch_reasons}, held for partners {p.server.batches_waited}"
                )
            log(
                f"  {design} N={n}: p50 {p.p50_ms} p95 {p.p95_ms} back {p.received_ratio:.2f} "
                f"cpu/frame {p.cpu_ms_per_frame} -> {'ok' if p.ok else 'miss'}{extra}"
            )
        res.capacity = (
            search.capacity if not config.jobs else max((p.jobs for p in res.points if p.ok), default=0)
        )
    finally:
        await server.stop()
    return res


async def run_bench(config: BenchConfig, media_root: Path, log: Callable[[str], None]) -> dict[str, Any]:
    frames = build_loop(SynthConfig(config.width, config.height, config.fps, config.test_case), media_root)
    source = media_path(media_root, "astronaut.png")
    results: list[DesignResult] = []
    runs: list[dict[str, Any]] = []
    for design in config.designs:
        log(f"{design}: starting")
        results.append(await measure_design(design, config, frames, source, runs, log))
    comparison = compare(results)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "bench_vs_stock",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": host_fingerprint(),
        "config": {
            "resolution": f"{config.width}x{config.height}",
            "fps": config.fps,
            "test_case": config.test_case,
            "designs": list(config.designs),
            "budget_ms": config.capacity.budget_ms,
            "min_fps_ratio": config.capacity.min_fps_ratio,
            "capacity_start": config.capacity.start,
            "capacity_step": config.capacity.step,
            "capacity_max_jobs": config.capacity.max_jobs,
            "stable_windows": config.capacity.stable_windows,
            "max_windows": config.capacity.max_windows,
            "window_s": config.window_s,
            "warmup_s": config.warmup_s,
            "jobs": list(config.jobs),
            "max_time_per_design_s": config.max_time_per_design_s,
            "gateway_args": list(config.gateway_args),
        },
        "designs": {r.design: r.to_dict() for r in results},
        "comparison": comparison,
        "runs": runs,
        "_results": results,
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--resolution", default="320x240")
    p.add_argument("--fps", type=float, default=15.0)
    p.add_argument("--designs", nargs="+", choices=DESIGNS, default=list(DESIGNS))
    p.add_argument(
        "--quick",
        action="store_true",
        help="short windows (3 s, 2 stable of at most 3), 1 s warm-up, N up to 10, 150 s per design",
    )
    p.add_argument("--jobs", type=int, nargs="+", help="measure these N only (no capacity search)")
    p.add_argument("--capacity-start", type=int, default=2)
    p.add_argument("--capacity-step", type=int, default=2)
    p.add_argument("--capacity-max-jobs", type=int, default=16)
    p.add_argument("--window", type=float, default=None, help="seconds per measurement window (default 5)")
    p.add_argument("--max-windows", type=int, default=None, help="windows per point at most (default 6)")
    p.add_argument("--warmup", type=float, default=None, help="seconds after all jobs joined (default 2)")
    p.add_argument("--max-time-per-design", type=float, default=None, help="seconds (default 600)")
    p.add_argument(
        "--gateway-arg",
        action="append",
        default=[],
        help="extra gateway CLI argument (repeatable), e.g. --gateway-arg=--batch-wait=window",
    )
    p.add_argument("--media-dir", type=Path, default=None)
    p.add_argument("--output", type=Path, default=None, help="write the JSON report here")
    return p


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    w, h = parse_resolution(args.resolution)
    quick = bool(args.quick)
    window = args.window if args.window is not None else (3.0 if quick else 5.0)
    max_windows = args.max_windows if args.max_windows is not None else (3 if quick else 6)
    cap = CapacityConfig(
        start=args.capacity_start,
        step=args.capacity_step,
        max_jobs=min(args.capacity_max_jobs, 10) if quick else args.capacity_max_jobs,
        stable_windows=2 if quick else 3,
        max_windows=max(max_windows, 2 if quick else 3),
    )
    return BenchConfig(
        width=w,
        height=h,
        fps=args.fps,
        designs=tuple(args.designs),
        capacity=cap,
        jobs=tuple(args.jobs or ()),
        window_s=window,
        warmup_s=args.warmup if args.warmup is not None else (1.0 if quick else 2.0),
        max_time_per_design_s=(
            args.max_time_per_design if args.max_time_per_design is not None else (150.0 if quick else 600.0)
        ),
        gateway_args=tuple(args.gateway_arg),
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    media_root = args.media_dir or default_media_dir(os.environ)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    report = asyncio.run(run_bench(config, media_root, log))
    results: list[DesignResult] = report.pop("_results")
    title = (
        f"{config.width}x{config.height}@{config.fps:g}, p95 <= {config.capacity.budget_ms:g} ms "
        f"and >= {config.capacity.min_fps_ratio:.0%} frames back"
    )
    print(format_table(results, report["comparison"], title))
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(clean(report), indent=2) + "\n")
        print(f"wrote {args.output}")
    return 0 if all(r.error is None for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
