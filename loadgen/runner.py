"""Drive N WHIP jobs against a gateway for one run point, in measurement windows; no printing, no exiting.

One run: jobs join at `ramp_up_rate` per second; once all joined, `warmup_s` passes unmeasured; then windows
of `window_s` follow until `enough(windows)` says stop (one window for a plain run; until stable for a
capacity point) or `max_measure_s` runs out. Each window is summarised only after `drain_s`, so frames still
in flight at its end are not miscounted as lost. The gateway's /api/stats is polled alongside and kept as
data.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from loadgen.client import ClientConfig, JoinError, WhipJob
from loadgen.stats import RunningTally, StatsCollector, WindowSummary
from loadgen.synth import FrameLoop


@dataclass(frozen=True)
class RunConfig:
    concurrent_jobs: int
    fps: float
    budget_ms: float = 150.0
    warmup_s: float = 2.0
    ramp_up_rate: float = 4.0  # jobs joining per second
    window_s: float = 10.0
    max_measure_s: float = 10.0
    drain_s: float = 1.0
    stats_interval_s: float = 2.0
    progress_interval_s: float = 1.0

    def __post_init__(self) -> None:
        if self.concurrent_jobs < 1 or self.fps <= 0 or self.window_s <= 0 or self.ramp_up_rate <= 0:
            raise ValueError("need concurrent_jobs >= 1, fps > 0, window_s > 0, ramp_up_rate > 0")


@dataclass(frozen=True)
class JobProgress:
    job: int
    fps: float
    p95_ms: float | None
    lost: int
    repeated: int


@dataclass(frozen=True)
class Progress:
    phase: str  # ramp-up | warmup | measure | done
    elapsed_s: float
    jobs_joined: int
    jobs_failed: int
    jobs: tuple[JobProgress, ...]
    gateway: dict[str, Any]  # extracted from the latest /api/stats (see `gateway_brief`)


ProgressFn = Callable[[Progress], None]


@dataclass
class RunResult:
    t0: float  # monotonic origin of every time in this result
    measure_start: float
    measure_end: float
    summary: WindowSummary
    windows: list[WindowSummary]
    collector: StatsCollector
    gateway_stats: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    gateway_errors: list[str] = field(default_factory=list)
    join_failures: list[dict[str, Any]] = field(default_factory=list)


def _num(d: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def gateway_brief(stats: dict[str, Any] | None) -> dict[str, Any]:
    """The few /api/stats numbers a live table and a report row show; missing fields become None."""
    if not stats:
        return {}
    devices = _num(stats, "gpu", "devices") or []
    gpu_util = [d.get("util_percent") for d in devices if isinstance(d, dict)]
    gpu_mem = [d.get("mem_percent") for d in devices if isinstance(d, dict)]
    return {
        "schema_version": stats.get("schema_version"),
        "cpu_percent": _num(stats, "system", "cpu_percent"),
        "process_cpu_percent": _num(stats, "system", "process_cpu_percent"),
        "rss_bytes": _num(stats, "system", "rss_bytes"),
        "gpu_util_percent": gpu_util[0] if len(gpu_util) == 1 else (gpu_util or None),
        "gpu_mem_percent": gpu_mem[0] if len(gpu_mem) == 1 else (gpu_mem or None),
        "fps_in": _num(stats, "frames", "fps_in"),
        "fps_out": _num(stats, "frames", "fps_out"),
        "server_p95_ms": _num(stats, "latency", "server_ms", "p95"),
        "sessions_open": _num(stats, "sessions", "open"),
        "degradation_level": _num(stats, "degradation", "level_name"),
    }


def gateway_window(first: dict[str, Any] | None, last: dict[str, Any] | None) -> dict[str, Any]:
    """The gateway's side of a measurement window: counter deltas plus the rolling summaries at its end."""
    if not last:
        return {"available": False}
    out: dict[str, Any] = {"available": True, "schema_version": last.get("schema_version")}
    out.update(gateway_brief(last))

    def delta(*path: str) -> Any:
        a, b = _num(first, *path), _num(last, *path)
        return b - a if isinstance(a, int | float) and isinstance(b, int | float) else b

    out["frames_received"] = delta("frames", "received")
    out["frames_processed"] = delta("frames", "processed")
    dropped = _num(last, "frames", "dropped")
    if isinstance(dropped, dict):
        out["frames_dropped"] = {k: delta("frames", "dropped", k) for k in dropped}
    out["server_ms"] = _num(last, "latency", "server_ms")
    out["stages_ms"] = _num(last, "latency", "stages_ms")
    out["batch"] = _num(last, "batch")
    observed = [
        v["max"]
        for v in (out["batch"] or {}).values()
        if isinstance(v, dict) and isinstance(v.get("max"), int | float)
    ]
    out["max_batch_observed"] = max(observed) if observed else None
    out["recommended_max_batch"] = _num(last, "degradation", "recommended_max_batch")
    # the gateway's own capacity estimate and utilisation at the window's end (to hold against the measured)
    out["capacity_sessions"] = _num(last, "degradation", "capacity_sessions")
    out["utilisation"] = _num(last, "degradation", "utilisation")
    out["capacity_binding"] = _num(last, "degradation", "capacity_binding")
    out["vram_peak_bytes"] = _num(last, "gpu", "vram_peak_bytes")
    out["rss_peak_bytes"] = _num(last, "system", "rss_peak_bytes")
    return out


class StatsPoller:
    """Polls GET /api/stats; keeps the answers (time, JSON) asked to be kept plus the latest `keep_recent`,
    and the errors; never raises.

    Not every answer: one is tens of kB (the dashboard's series and events ride along), and a run of hours
    polled every 2 s would hold hundreds of MB of them in the process that measures.
    """

    def __init__(
        self,
        http: aiohttp.ClientSession,
        url: str,
        headers: dict[str, str],
        interval_s: float,
        keep_recent: int = 8,
    ) -> None:
        self._http = http
        self._url = url.rstrip("/") + "/api/stats"
        self._headers = headers
        self._interval = interval_s
        self._recent: deque[tuple[float, dict[str, Any]]] = deque(maxlen=keep_recent)
        self._kept: list[tuple[float, dict[str, Any]]] = []
        self.errors: list[str] = []

    @property
    def samples(self) -> list[tuple[float, dict[str, Any]]]:
        """The kept answers and the recent ones, oldest first."""
        merged = {id(data): (t, data) for t, data in (*self._kept, *self._recent)}
        return sorted(merged.values(), key=lambda s: s[0])

    async def fetch(self, keep: bool = False) -> dict[str, Any] | None:
        try:
            async with self._http.get(
                self._url, headers=self._headers, timeout=aiohttp.ClientTimeout(total=3)
            ) as r:
                if r.status != 200:
                    self._error(f"/api/stats HTTP {r.status}")
                    return None
                data = await r.json(content_type=None)
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            self._error(f"/api/stats {type(exc).__name__}: {exc}")
            return None
        if not isinstance(data, dict):
            self._error("/api/stats returned non-object JSON")
            return None
        sample = (time.monotonic(), data)
        self._recent.append(sample)
        if keep:
            self._kept.append(sample)
        return data

    def _error(self, msg: str) -> None:
        if msg not in self.errors:
            self.errors.append(msg)

    @property
    def latest(self) -> dict[str, Any] | None:
        return self._recent[-1][1] if self._recent else None

    def nearest(self, t: float) -> dict[str, Any] | None:
        samples = self.samples
        if not samples:
            return None
        return min(samples, key=lambda s: abs(s[0] - t))[1]

    async def run(self) -> None:
        while True:
            await self.fetch()
            await asyncio.sleep(self._interval)


class _PointRun:
    """The state of one run that its progress reports read: phase, jobs, failures, the measurement's start."""

    def __init__(self, config: RunConfig, collector: StatsCollector, poller: StatsPoller) -> None:
        self.config = config
        self.collector = collector
        self.poller = poller
        self.t0 = time.monotonic()
        self.jobs: list[WhipJob] = []
        self.failed = 0
        self.phase = "ramp-up"
        self.measure_start = float("inf")
        self.tally = RunningTally(self.t0)  # since the start, then since the measurement's start

    def progress(self) -> Progress:
        now = time.monotonic()
        live = self.collector.window(now - 3.0, now - 1.0)
        if self.phase in ("measure", "done") and self.tally.start != self.measure_start:
            self.tally = RunningTally(self.measure_start)
        self.tally.advance(self.collector, now - self.config.drain_s)
        rows = []
        for j in live.jobs:
            sf = self.tally.jobs.get(j.job)
            rows.append(
                JobProgress(
                    j.job,
                    j.received_fps,
                    sf.latency_ms.percentile(95) if sf else None,
                    sf.lost if sf else 0,
                    sf.repeated if sf else 0,
                )
            )
        return Progress(
            self.phase,
            now - self.t0,
            len(self.jobs) - self.failed,
            self.failed,
            tuple(rows),
            gateway_brief(self.poller.latest),
        )

    async def report_progress(self, on_progress: ProgressFn | None) -> None:
        while True:
            await asyncio.sleep(self.config.progress_interval_s)
            if on_progress is not None:
                on_progress(self.progress())

    async def start_jobs(
        self, client: ClientConfig, frame_loop: FrameLoop, http: aiohttp.ClientSession
    ) -> None:
        """Jobs join at the ramp-up rate; a job that cannot join is counted, any other error raised."""
        config = self.config
        starts: list[asyncio.Task[None]] = []
        for i in range(config.concurrent_jobs):
            job = WhipJob(i, client, frame_loop, config.fps, self.collector.record, http)
            self.jobs.append(job)
            starts.append(asyncio.ensure_future(job.start()))
            if i + 1 < config.concurrent_jobs:
                await asyncio.sleep(1.0 / config.ramp_up_rate)
        results = await asyncio.gather(*starts, return_exceptions=True)
        self.failed = sum(1 for r in results if isinstance(r, BaseException))
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, JoinError):
                raise r

    async def measure(
        self, enough: Callable[[list[WindowSummary]], bool] | None
    ) -> tuple[list[WindowSummary], float]:
        """Windows from the measurement's start until `enough` says so or the allowance is spent, and the
        measurement's end."""
        config = self.config
        windows: list[WindowSummary] = []
        w_start = self.measure_start
        while True:
            w_end = w_start + config.window_s
            await asyncio.sleep(max(0.0, w_end + config.drain_s - time.monotonic()))
            windows.append(self.collector.window(w_start, w_end))
            w_start = w_end
            if enough is None or enough(windows):
                break
            if w_start + config.window_s - self.measure_start > config.max_measure_s + 1e-9:
                break
        return windows, w_start


async def run_point(
    url: str,
    frame_loop: FrameLoop,
    config: RunConfig,
    client: ClientConfig | None = None,
    on_progress: ProgressFn | None = None,
    enough: Callable[[list[WindowSummary]], bool] | None = None,
) -> RunResult:
    """One run against `url`: ramp up, warm up, measure windows, leave. Returns all the data."""
    client = client or ClientConfig(url=url)
    collector = StatsCollector(config.budget_ms)

    async with aiohttp.ClientSession() as http:
        poller = StatsPoller(http, url, client.headers(), config.stats_interval_s)
        run = _PointRun(config, collector, poller)
        poll_task = asyncio.ensure_future(poller.run())
        progress_task = asyncio.ensure_future(run.report_progress(on_progress))
        try:
            await run.start_jobs(client, frame_loop, http)
            run.phase = "warmup"
            await asyncio.sleep(config.warmup_s)
            run.phase = "measure"
            run.measure_start = time.monotonic()
            await poller.fetch(keep=True)
            windows, measure_end = await run.measure(enough)
            await poller.fetch(keep=True)
            run.phase = "done"
            if on_progress is not None:
                on_progress(run.progress())
        finally:
            progress_task.cancel()
            poll_task.cancel()
            for task in (progress_task, poll_task):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await asyncio.gather(*(j.stop() for j in run.jobs), return_exceptions=True)

    t0, measure_start = run.t0, run.measure_start
    return RunResult(
        t0=t0,
        measure_start=measure_start,
        measure_end=measure_end,
        summary=collector.window(measure_start, measure_end),
        windows=windows,
        collector=collector,
        gateway_stats=list(poller.samples),
        gateway_errors=list(poller.errors),
        join_failures=[
            {"job": f.job, "t_s": f.t - t0, "detail": f.detail} for f in collector.join_failures()
        ],
    )
