"""The cells a `loadgen run` or `loadgen capacity` measures: batch size x resolution x test case (x duration).

Each batch size gets its gateway (an embedded one unless `--url`), each cell one measured run, or for a
capacity search one run per concurrency the search asks for (loadgen.capacity decides, this module only
measures). Returns report entries; printing is the CLI's.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, replace
from typing import Any

import aiohttp

from loadgen.capacity import CapacityConfig, CapacitySearch, PointMeasurement, PointResult, WindowMeasure
from loadgen.client import ClientConfig, upload_source
from loadgen.embedded import EmbeddedGateway, EmbeddedGatewayConfig
from loadgen.media import default_media_dir, media_path
from loadgen.report import loadgen_run_entry
from loadgen.runner import RunConfig, RunResult, run_point
from loadgen.stats import WindowSummary
from loadgen.synth import FrameLoop, SynthConfig, build_loop
from loadgen.tables import LiveView


@dataclass
class Cell:
    test_case: str
    width: int
    height: int
    duration: float
    batch_size: int | None

    @property
    def name(self) -> str:
        b = f"-b{self.batch_size}" if self.batch_size is not None else ""
        return f"{self.test_case}-{self.width}x{self.height}-{self.duration:g}s{b}"


@dataclass
class Measured:
    """What the cells gave: report entries, the raw results (for CSV and charts), the capacity verdict."""

    entries: list[dict[str, Any]]
    results: list[tuple[str, RunResult]]
    capacity: dict[str, Any] | None = None


def _meta(cell: Cell, jobs: int, fps: float) -> dict[str, Any]:
    return {
        "test_case": cell.test_case,
        "resolution": f"{cell.width}x{cell.height}",
        "fps": fps,
        "concurrent_jobs": jobs,
        "batch_size": cell.batch_size,
    }


def _embedded(args: argparse.Namespace, batch: int | None) -> EmbeddedGateway:
    capacity = args.command == "capacity"
    return EmbeddedGateway(
        EmbeddedGatewayConfig(
            budget_ms=args.budget_ms,
            max_batch=batch,
            engine=args.engine,
            providers=args.providers,
            processors=args.processors,
            token=args.token,
            log_level=args.gateway_log_level,
            # a capacity search measures full quality, and must be able to open every job it tries
            degradation=not capacity or args.keep_degradation,
            max_sessions=max(args.concurrent_jobs, args.capacity_max_jobs if capacity else 0),
        )
    )


async def _client(args: argparse.Namespace, url: str, media_root: Any) -> ClientConfig:
    client = ClientConfig(
        url=url,
        token=args.token,
        processors=args.session_processors,
        audio=args.audio,
        network=args.network,
        picture_quality=args.picture_quality,
        transport_cc=args.transport_cc,
        codec=args.codec,
        publisher_denoiser=args.publisher_denoiser,
    )
    if not args.no_source:
        image = args.source_image or media_path(media_root, "astronaut.png")
        async with aiohttp.ClientSession() as http:
            source_id = await upload_source(http, client, image)
        client = replace(client, source_id=source_id)
    return client


async def run_cells(args: argparse.Namespace, view: LiveView, say: Any) -> Measured:
    """Every cell of the sweep; `say(text)` announces an embedded gateway's start."""
    media_root = args.media_dir or default_media_dir(os.environ)
    resolutions = args.resolutions or [args.resolution]
    batch_sizes: list[int | None] = list(args.batch_sizes) if args.batch_sizes else [None]
    loops: dict[tuple[str, int, int], FrameLoop] = {}
    out = Measured([], [])

    def frame_loop(case: str, w: int, h: int) -> FrameLoop:
        key = (case, w, h)
        if key not in loops:
            loops[key] = build_loop(
                SynthConfig(w, h, args.fps, case, args.loop_frames, args.source_video), media_root
            )
        return loops[key]

    for batch in batch_sizes:
        gateway: EmbeddedGateway | None = None
        url = args.url
        if url is None:
            gateway = _embedded(args, batch)
            say(f"starting embedded gateway{'' if batch is None else f' (max batch {batch})'} ...")
            url = await gateway.start()
        try:
            client = await _client(args, url, media_root)
            for w, h in resolutions:
                for case in args.test_cases:
                    if args.command == "capacity":
                        cell = Cell(case, w, h, args.window, batch)
                        out.capacity = await measure_capacity(
                            args, url, client, frame_loop(case, w, h), cell, view, out
                        )
                        continue
                    for d in args.durations or [args.duration]:
                        await _measure_run(
                            args, url, client, frame_loop(case, w, h), Cell(case, w, h, d, batch), view, out
                        )
        finally:
            if gateway is not None:
                await gateway.stop()
    return out


async def _measure_run(
    args: argparse.Namespace,
    url: str,
    client: ClientConfig,
    loop: FrameLoop,
    cell: Cell,
    view: LiveView,
    out: Measured,
) -> None:
    view.title = cell.name
    cfg = RunConfig(
        concurrent_jobs=args.concurrent_jobs,
        fps=args.fps,
        budget_ms=args.budget_ms,
        warmup_s=args.warmup,
        ramp_up_rate=args.ramp_up_rate,
        window_s=cell.duration,
        max_measure_s=cell.duration,
    )
    result = await run_point(url, loop, cfg, client, view.update)
    out.entries.append(loadgen_run_entry(cell.name, result, _meta(cell, args.concurrent_jobs, args.fps)))
    out.results.append((cell.name, result))


def point_dict(p: PointResult) -> dict[str, Any]:
    """A capacity point as the report keeps it: the statistics its verdict (`ok`) was decided on."""
    return {
        "p95_ms": p.p95_ms,
        "received_ratio": p.received_ratio,
        "stable": p.stable,
        "windows": p.windows,
        "ok": p.ok,
    }


def capacity_summary(search: CapacitySearch, cell: Cell, timed_out: bool) -> dict[str, Any]:
    cfg = search.config
    return {
        "capacity": search.capacity,
        "budget_ms": cfg.budget_ms,
        "min_fps_ratio": cfg.min_fps_ratio,
        "stable_windows": cfg.stable_windows,
        "test_case": cell.test_case,
        "resolution": f"{cell.width}x{cell.height}",
        "timed_out": timed_out,
        "points": [{"jobs": p.jobs, **point_dict(p)} for p in search.points],
    }


async def measure_capacity(
    args: argparse.Namespace,
    url: str,
    client: ClientConfig,
    loop: FrameLoop,
    cell: Cell,
    view: LiveView,
    out: Measured,
) -> dict[str, Any]:
    """Measure each concurrency the search asks for until it finishes or `--capacity-max-time` is spent."""
    cap_cfg = CapacityConfig(
        budget_ms=args.budget_ms,
        start=args.capacity_start,
        step=args.capacity_step,
        max_jobs=args.capacity_max_jobs,
        max_windows=max(3, args.max_windows),
    )
    search = CapacitySearch(cap_cfg)
    deadline = time.monotonic() + args.capacity_max_time
    timed_out = False
    while (n := search.next_jobs()) is not None:
        if time.monotonic() > deadline:
            timed_out = True
            break
        point = PointMeasurement(n, cap_cfg)

        def enough(windows: list[WindowSummary], point: PointMeasurement = point) -> bool:
            w = windows[-1]
            point.add(WindowMeasure(w.latency.p95, w.received_ratio))
            return point.done

        view.title = f"capacity {cell.name} N={n}"
        cfg = RunConfig(
            concurrent_jobs=n,
            fps=args.fps,
            budget_ms=args.budget_ms,
            warmup_s=args.warmup,
            ramp_up_rate=args.ramp_up_rate,
            window_s=args.window,
            max_measure_s=args.window * cap_cfg.max_windows,
        )
        result = await run_point(url, loop, cfg, client, view.update, enough)
        if not point.windows:
            point.add(WindowMeasure(result.summary.latency.p95, result.summary.received_ratio))
        pr = point.result()
        search.report(pr)
        name = f"capacity-{cell.name}-n{n}"
        entry = loadgen_run_entry(name, result, _meta(cell, n, args.fps))
        entry["capacity_point"] = point_dict(pr)
        entry["slo_met"] = pr.ok
        out.entries.append(entry)
        out.results.append((name, result))
    return capacity_summary(search, cell, timed_out)
