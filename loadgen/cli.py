"""`loadgen`: open N real WHIP sessions against a gateway and measure every frame's end-to-end latency.

The only module of the load generator that prints or exits. Exit codes: 0 = the SLO held (p95 <= budget in
every run, or a capacity of at least one job), 1 = it did not, 2 = usage or connection errors (bad flags,
gateway not reachable or not ready, no job could join).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
from rich.console import Console
from rich.live import Live
from rich.table import Table

from loadgen.capacity import CapacityConfig, CapacitySearch, PointMeasurement, WindowMeasure
from loadgen.client import ClientConfig, JoinError, upload_source
from loadgen.embedded import EmbeddedGateway, EmbeddedGatewayConfig, GatewayStartError
from loadgen.fingerprint import host_fingerprint
from loadgen.impair import PROFILES, Impairment, parse_impairment
from loadgen.media import MediaUnavailable, default_media_dir, media_path
from loadgen.report import build_report, loadgen_run_entry, write_csv, write_html, write_json
from loadgen.runner import Progress, RunConfig, RunResult, run_point
from loadgen.stats import WindowSummary
from loadgen.synth import TEST_CASES, FrameLoop, SynthConfig, build_loop


class UsageError(ValueError):
    pass


def parse_resolution(text: str) -> tuple[int, int]:
    try:
        w, h = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"resolution must be WxH, got {text!r}") from None
    if w <= 0 or h <= 0:
        raise argparse.ArgumentTypeError(f"resolution must be positive, got {text!r}")
    return w, h


def parse_test_cases(text: str) -> list[str]:
    cases = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in cases if c not in TEST_CASES]
    if bad or not cases:
        raise argparse.ArgumentTypeError(f"test cases must be among {', '.join(TEST_CASES)}; got {text!r}")
    return cases


MERGE_EPILOG = """\
subcommand:
  loadgen merge REPORT.json [REPORT.json ...] --output-report ALL.json
      one report with exact statistics over every frame of several loadgens that ran at the same time
      (loadgen merge --help)"""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's default in its help line, unless the line already says it (or there is none)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "default" not in text
            and action.option_strings
            and action.default not in (None, False, argparse.SUPPRESS)
        ):
            default = action.default
            if isinstance(default, tuple) and len(default) == 2:  # a resolution
                default = "x".join(map(str, default))
            elif isinstance(default, list):
                default = ",".join(map(str, default))
            text += f" (default {default})"
        return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="loadgen", description=__doc__, epilog=MERGE_EPILOG, formatter_class=_HelpFormatter
    )
    p.add_argument("--url", help="gateway base URL; without it an embedded gateway is started on 127.0.0.1")
    p.add_argument("--token", help="bearer token for the gateway (also passed to an embedded one)")
    p.add_argument(
        "--concurrent-jobs", metavar="N", type=int, default=1, help="WHIP publishers at once (default 1)"
    )
    p.add_argument(
        "--duration",
        metavar="SECONDS",
        type=float,
        default=30.0,
        help="measured seconds per run, after warm-up",
    )
    p.add_argument("--durations", metavar="SECONDS", type=float, nargs="+", help="sweep: several durations")
    p.add_argument(
        "--resolution", metavar="WxH", type=parse_resolution, default=(640, 360), help="WxH (default 640x360)"
    )
    p.add_argument(
        "--resolutions", metavar="WxH", type=parse_resolution, nargs="+", help="sweep: several resolutions"
    )
    p.add_argument(
        "--batch-sizes",
        metavar="N",
        type=int,
        nargs="+",
        help="sweep: embedded gateway --max-batch values (remote: observed, reported)",
    )
    p.add_argument(
        "--fps", metavar="FPS", type=float, default=15.0, help="frames per second per job (default 15)"
    )
    p.add_argument(
        "--audio",
        action="store_true",
        help="each job also sends Opus (a click a second) and a WHEP viewer per job measures the "
        "A/V offset the gateway's sender reports give (report: jobs[].av_offset_ms)",
    )
    p.add_argument(
        "--transport-cc",
        action="store_true",
        help="offer transport-cc and return its feedback for the processed stream, as a browser "
        "does (the gateway's sender then reads per-packet arrivals, not receiver reports "
        "alone)",
    )
    p.add_argument(
        "--codec",
        choices=("VP8", "H264"),
        default=None,
        help="offer only this video codec (as e.g. OBS offers H.264 only); the gateway returns "
        "the processed stream in it (default: aiortc's list, VP8 first)",
    )
    p.add_argument(
        "--publisher-denoiser",
        type=int,
        choices=range(0, 7),
        default=0,
        metavar="0..6",
        help="libvpx's temporal denoiser in each publisher's VP8 encoder: 0 (default) off, so "
        "frame stamps measure the gateway alone; 4 is what aiortc and libwebrtc on x86 send, "
        "and it leaves stale blocks in 2-4 %% of the stamps",
    )
    p.add_argument(
        "--picture-quality",
        action="store_true",
        help="measure each returned frame's fidelity to the one sent: PSNR of the median 16x16 "
        "block's luma error, so the swapped face does not count (report: picture_psnr_db)",
    )
    p.add_argument(
        "--test-cases",
        metavar="CASES",
        type=parse_test_cases,
        default=["single_face"],
        help="comma list: single_face, multi_face (each its own run)",
    )
    p.add_argument("--source-video", type=Path, help="single_face: frames of this clip instead of the still")
    p.add_argument(
        "--source-image",
        type=Path,
        help="face swapped into the video (POST /sources); default: the provisioned astronaut.png",
    )
    p.add_argument(
        "--no-source",
        action="store_true",
        help="upload no source face (the gateway's default source, or pass-through)",
    )
    p.add_argument("--session-processors", help="per-session ?processors= (e.g. face_swapper,face_enhancer)")
    p.add_argument(
        "--loop-frames",
        metavar="N",
        type=int,
        default=0,
        help="precomputed frames per loop (default 0 = 2 s)",
    )
    p.add_argument(
        "--budget-ms", metavar="MS", type=float, default=150.0, help="end-to-end SLO per frame, p95"
    )
    p.add_argument(
        "--warmup",
        metavar="SECONDS",
        type=float,
        default=2.0,
        help="seconds after ramp-up excluded from statistics",
    )
    p.add_argument(
        "--ramp-up-rate", metavar="JOBS_PER_S", type=float, default=4.0, help="jobs joining per second"
    )
    p.add_argument("--output-report", metavar="FILE.json", type=Path, help="JSON report path")
    p.add_argument("--csv", metavar="FILE.csv", type=Path, help="per-frame samples CSV path")
    p.add_argument("--html", metavar="FILE.html", type=Path, help="HTML report with charts")
    p.add_argument("--find-capacity", action="store_true", help="search the largest N that meets the SLO")
    p.add_argument(
        "--keep-degradation",
        action="store_true",
        help="capacity search on an embedded gateway: leave its adaptive degradation on (default "
        "off, so the capacity is that of the full-quality pipeline)",
    )
    p.add_argument("--capacity-start", metavar="N", type=int, default=1, help="capacity: first N")
    p.add_argument(
        "--capacity-step", metavar="N", type=int, default=2, help="capacity: N step before bisecting"
    )
    p.add_argument("--capacity-max-jobs", metavar="N", type=int, default=32, help="capacity: largest N tried")
    p.add_argument(
        "--window",
        metavar="SECONDS",
        type=float,
        default=5.0,
        help="capacity: seconds per measurement window",
    )
    p.add_argument(
        "--max-windows", metavar="N", type=int, default=6, help="capacity: windows per point at most"
    )
    p.add_argument(
        "--capacity-max-time",
        metavar="SECONDS",
        type=float,
        default=900.0,
        help="capacity: total seconds at most",
    )
    p.add_argument("--engine", help="embedded gateway: --engine")
    p.add_argument("--providers", help="embedded gateway: --providers")
    p.add_argument("--processors", help="embedded gateway: --processors")
    p.add_argument("--gateway-log-level", default="warning", help="embedded gateway: --log-level")
    p.add_argument("--media-dir", type=Path, help="provisioned media (default ~/.cache/livefuse/media)")
    p.add_argument("--no-live", action="store_true", help="no live table (e.g. in CI logs)")
    p.add_argument(
        "--network",
        metavar="PROFILE|SPEC",
        type=_network,
        help="impair each job's link, both directions: a profile "
        f"({', '.join(PROFILES)}) or delay=MS,jitter=MS,loss=PCT%%,rate=KBITS,queue=MS",
    )
    return p


def _network(spec: str) -> Impairment:
    try:
        return parse_impairment(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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


def progress_table(title: str, p: Progress, budget_ms: float) -> Table:
    t = Table(
        title=f"{title}  [{p.phase}] {p.elapsed_s:.0f}s  joined {p.jobs_joined}  failed {p.jobs_failed}"
    )
    for col in ("job", "fps", "p95 ms", "lost", "repeated"):
        t.add_column(col, justify="right")
    for j in p.jobs:
        p95 = "-" if j.p95_ms is None else f"{j.p95_ms:.0f}"
        style = "red" if j.p95_ms is not None and j.p95_ms > budget_ms else None
        t.add_row(str(j.job), f"{j.fps:.1f}", p95, str(j.lost), str(j.repeated), style=style)
    g = p.gateway
    if g:

        def f(v: Any) -> str:
            return "-" if v is None else (f"{v:.0f}" if isinstance(v, float | int) else str(v))

        t.caption = (
            f"gateway cpu {f(g.get('cpu_percent'))}%  proc {f(g.get('process_cpu_percent'))}%  "
            f"gpu {f(g.get('gpu_util_percent'))}%  "
            f"fps in/out {f(g.get('fps_in'))}/{f(g.get('fps_out'))}  "
            f"server p95 {f(g.get('server_p95_ms'))} ms  level {f(g.get('degradation_level'))}"
        )
    return t


def result_table(runs: list[dict[str, Any]], capacity: dict[str, Any] | None) -> Table:
    t = Table(title="loadgen result")
    t.add_column("run", no_wrap=True)
    # "lost" counts every frame not identified on return; "unread" is the part of it that did come back but
    # whose stamp band no longer reads (e.g. macroblocks the publisher's own encoder left stale)
    for col in (
        "jobs",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "in budget",
        "sent",
        "recv",
        "lost",
        "unread",
        "rep",
        "fps/job",
        "SLO",
    ):
        t.add_column(col, justify="right")
    for r in runs:
        lat = r["latency_ms"]

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.1f}"

        wb = r.get("within_budget")
        fr = r["frames"]
        t.add_row(
            r["name"],
            str(r["concurrent_jobs"]),
            ms(lat["p50"]),
            ms(lat["p95"]),
            ms(lat["p99"]),
            "-" if wb is None else f"{wb * 100:.1f}%",
            str(fr["sent"]),
            str(fr["received"]),
            str(fr["lost"]),
            str(fr.get("unreadable", 0)),
            str(fr["repeated"]),
            f"{r['fps_per_job']['mean']:.1f}",
            "[green]ok[/]" if r["slo_met"] else "[red]MISS[/]",
        )
        for job in r.get("jobs", []):
            av_ms = job.get("av_offset_ms")
            if av_ms:
                t.add_row(
                    f"  job {job['job']} A/V ms",
                    "",
                    f"{av_ms['p50']:+.1f}",
                    f"{av_ms['p95']:+.1f}",
                    f"p5 {av_ms['p5']:+.1f}",
                    f"n={av_ms['count']}",
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    "[green]ok[/]" if -45 <= av_ms["p5"] and av_ms["p95"] <= 125 else "[red]off[/]",
                )
    if capacity is not None:
        t.caption = (
            f"capacity: {capacity['capacity']} concurrent jobs within {capacity['budget_ms']:g} ms p95"
        )
    return t


class LiveView:
    """The rich Live table; a no-op when disabled."""

    def __init__(self, console: Console, enabled: bool, budget_ms: float) -> None:
        self.console = console
        self.enabled = enabled
        self.budget_ms = budget_ms
        self.title = ""
        self._live: Live | None = None

    def __enter__(self) -> LiveView:
        if self.enabled:
            self._live = Live(Table(), console=self.console, refresh_per_second=2, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def update(self, p: Progress) -> None:
        if self._live is not None:
            self._live.update(progress_table(self.title, p, self.budget_ms))


async def _run_cells(
    args: argparse.Namespace, view: LiveView, console: Console
) -> tuple[list[dict[str, Any]], list[tuple[str, RunResult]], dict[str, Any] | None]:
    media_root = args.media_dir or default_media_dir(os.environ)
    resolutions = args.resolutions or [args.resolution]
    durations = args.durations or [args.duration]
    batch_sizes: list[int | None] = list(args.batch_sizes) if args.batch_sizes else [None]
    loops: dict[tuple[str, int, int], FrameLoop] = {}
    entries: list[dict[str, Any]] = []
    results: list[tuple[str, RunResult]] = []
    capacity: dict[str, Any] | None = None

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
            gateway = EmbeddedGateway(
                EmbeddedGatewayConfig(
                    budget_ms=args.budget_ms,
                    max_batch=batch,
                    engine=args.engine,
                    providers=args.providers,
                    processors=args.processors,
                    token=args.token,
                    log_level=args.gateway_log_level,
                    # a capacity search measures full quality, and must be able to open every job it tries
                    degradation=not args.find_capacity or args.keep_degradation,
                    max_sessions=max(
                        args.concurrent_jobs, args.capacity_max_jobs if args.find_capacity else 0
                    ),
                )
            )
            console.print(f"starting embedded gateway{'' if batch is None else f' (max batch {batch})'} ...")
            url = await gateway.start()
        try:
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
            for w, h in resolutions:
                for case in args.test_cases:
                    if args.find_capacity:
                        cell = Cell(case, w, h, args.window, batch)
                        capacity = await _capacity(
                            args, url, client, frame_loop(case, w, h), cell, view, entries, results
                        )
                        continue
                    for d in durations:
                        cell = Cell(case, w, h, d, batch)
                        view.title = cell.name
                        cfg = RunConfig(
                            concurrent_jobs=args.concurrent_jobs,
                            fps=args.fps,
                            budget_ms=args.budget_ms,
                            warmup_s=args.warmup,
                            ramp_up_rate=args.ramp_up_rate,
                            window_s=d,
                            max_measure_s=d,
                        )
                        result = await run_point(url, frame_loop(case, w, h), cfg, client, view.update)
                        entries.append(
                            loadgen_run_entry(cell.name, result, _meta(cell, args.concurrent_jobs, args.fps))
                        )
                        results.append((cell.name, result))
        finally:
            if gateway is not None:
                await gateway.stop()
    return entries, results, capacity


def _meta(cell: Cell, jobs: int, fps: float) -> dict[str, Any]:
    return {
        "test_case": cell.test_case,
        "resolution": f"{cell.width}x{cell.height}",
        "fps": fps,
        "concurrent_jobs": jobs,
        "batch_size": cell.batch_size,
    }


async def _capacity(
    args: argparse.Namespace,
    url: str,
    client: ClientConfig,
    loop: FrameLoop,
    cell: Cell,
    view: LiveView,
    entries: list[dict[str, Any]],
    results: list[tuple[str, RunResult]],
) -> dict[str, Any]:
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
        entry["capacity_point"] = {
            "p95_ms": pr.p95_ms,
            "received_ratio": pr.received_ratio,
            "stable": pr.stable,
            "windows": pr.windows,
            "ok": pr.ok,
        }
        entry["slo_met"] = pr.ok
        entries.append(entry)
        results.append((name, result))
    return {
        "capacity": search.capacity,
        "budget_ms": args.budget_ms,
        "min_fps_ratio": cap_cfg.min_fps_ratio,
        "test_case": cell.test_case,
        "resolution": f"{cell.width}x{cell.height}",
        "timed_out": timed_out,
        "points": [
            {
                "jobs": p.jobs,
                "p95_ms": p.p95_ms,
                "received_ratio": p.received_ratio,
                "stable": p.stable,
                "windows": p.windows,
                "ok": p.ok,
            }
            for p in search.points
        ],
    }


def _charts(
    results: list[tuple[str, RunResult]],
    budget_ms: float,
    fps: float,
    capacity: dict[str, Any] | None,
    runs: list[dict[str, Any]],
) -> dict[str, bytes]:
    from loadgen import charts

    out: dict[str, bytes] = {}
    for name, r in results[:8]:
        samples = r.collector.samples(r.measure_start, r.measure_end)
        out[f"{name}: latency histogram"] = charts.latency_histogram(
            [s.latency_ms for s in samples], budget_ms
        )
        per_job: dict[int, list[tuple[float, float]]] = {}
        for s in r.collector.samples():
            per_job.setdefault(s.job, []).append((s.sent_t - r.t0, s.latency_ms))
        out[f"{name}: latency over time"] = charts.latency_over_time(per_job, budget_ms)
        fps_series = {j: [(t - r.t0, v) for t, v in pts] for j, pts in r.collector.fps_series().items()}
        out[f"{name}: fps over time"] = charts.fps_over_time(fps_series, fps)
    stages = {
        r["name"]: {
            k: v.get("mean", 0.0)
            for k, v in (r["gateway"].get("stages_ms") or {}).items()
            if isinstance(v, dict)
        }
        for r in runs
    }
    if any(stages.values()):
        out["stage split (gateway, mean ms)"] = charts.stage_split(stages)
    if capacity is not None:
        pts = [(p["jobs"], p["p95_ms"], p["received_ratio"]) for p in capacity["points"]]
        out["capacity curve"] = charts.capacity_curve(pts, budget_ms, capacity["capacity"])
    return out


def merge_main(argv: list[str]) -> int:
    """`loadgen merge r1.json r2.json ... --output-report all.json`: exact union statistics."""
    import json

    from loadgen.merge import MergeError, merge_reports

    p = argparse.ArgumentParser(
        prog="loadgen merge", description="Merge reports of loadgens that ran at the same time."
    )
    p.add_argument("reports", nargs="+", type=Path)
    p.add_argument("--output-report", type=Path, required=True)
    args = p.parse_args(argv)
    err = Console(stderr=True)
    try:
        reports = [json.loads(path.read_text()) for path in args.reports]
        merged = merge_reports(reports)
    except (OSError, ValueError) as e:  # MergeError and JSONDecodeError are ValueErrors
        known = isinstance(e, MergeError | OSError)
        err.print(f"error: {e}" if known else f"error: not a JSON report: {e}")
        return 2
    write_json(merged, args.output_report)
    console = Console()
    console.print(result_table(merged["runs"], None))
    console.print(f"report: {args.output_report} (merged {len(reports)} reports)")
    return 0 if merged["slo_met"] else 1


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list and args_list[0] == "merge":
        return merge_main(list(args_list[1:]))
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on usage errors, 0 on --help
        return int(e.code or 0)
    # Piped output (CI logs, `make demo | tee`) gets a fixed width so the result table is not squeezed.
    console = Console() if sys.stdout.isatty() else Console(width=150)
    err = Console(stderr=True)
    if args.concurrent_jobs < 1 or args.fps <= 0 or args.budget_ms <= 0 or args.ramp_up_rate <= 0:
        err.print("error: --concurrent-jobs, --fps, --budget-ms and --ramp-up-rate must be positive")
        return 2
    for w, h in args.resolutions or [args.resolution]:
        if w % 2 or h % 4 or w < 64 or h < 48:
            err.print(
                f"error: resolution {w}x{h}: width must be even and >= 64, height a multiple of 4 and >= 48"
            )
            return 2
    if args.html and importlib.util.find_spec("matplotlib") is None:
        err.print("error: --html draws its charts with matplotlib: pip install 'livefuse[report]'")
        return 2
    if args.batch_sizes and args.url:
        err.print(
            "note: --batch-sizes with --url cannot change a remote gateway; the observed batch is reported"
        )
        args.batch_sizes = None
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    host = host_fingerprint()
    view = LiveView(err, not args.no_live and err.is_terminal, args.budget_ms)
    try:
        with view:
            entries, results, capacity = asyncio.run(_run_cells(args, view, console))
    except GatewayStartError as e:
        err.print(f"error: embedded gateway failed: {e}")
        return 2
    except JoinError as e:
        err.print(f"error: {e}")
        return 2
    except (MediaUnavailable, OSError, aiohttp.ClientError) as e:
        err.print(f"error: {e}")
        return 2
    except KeyboardInterrupt:
        err.print("interrupted")
        return 2
    report = build_report("loadgen", host, config, entries, capacity)
    if args.output_report:
        write_json(report, args.output_report)
    if args.csv:
        write_csv(results, args.csv)
    if args.html:
        write_html(report, _charts(results, args.budget_ms, args.fps, capacity, entries), args.html)
    console.print(result_table(entries, capacity))
    for entry in entries:
        for f in entry["join_failures"][:3]:
            err.print(f"join failure ({entry['name']}, job {f['job']}): {f['detail']}")
    if args.output_report:
        console.print(f"report: {args.output_report}")
    joined_any = any(len(entry["join_failures"]) < entry["concurrent_jobs"] for entry in entries)
    if not entries or not joined_any:
        err.print("error: no job could join the gateway")
        return 2
    return 0 if report["slo_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
