"""`Monitor`: the one object the gateway reports to; it records, and reports one stats snapshot.

Execution lives here (the sampler thread, the event-loop-lag task, the event file); rolling stats live in
window.py and the stats object in snapshot.py. What to do about the load is the governor's
(gateway.control): the monitor hands it each sample's measurements and shows its state. `record_frame` is
called per frame from the media path — possibly from worker threads — so it takes one lock, does O(stages)
work and never blocks on I/O (events it raises are rate-limited). Nothing here raises into the gateway from a
background activity: sampler failures are counted and shown in the snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gateway.control.capacity import CapacityEstimate, ResourceUse, usable_cores
from gateway.control.degradation import LEVEL_NAMES, ControllerInput, DegradationConfig
from gateway.control.governor import Governor

from . import events as ev
from .events import EventLog, JsonlRotatingWriter, RateLimiter
from .gpu import GpuReader, GpuReading
from .records import FrameRecord, LinkState, Outcome
from .sampler import SamplerThread, SystemSample
from .snapshot import (
    DROP_REASONS,
    DegradationState,
    HistogramData,
    MonitorCost,
    SessionStats,
    StatsSnapshot,
)
from .window import (
    DEFAULT_LATENCY_BUCKETS_MS,
    CumulativeHistogram,
    RateCounter,
    RollingWindow,
    SeriesRing,
    histogram_counts,
    summarize,
)

log = logging.getLogger(__name__)

FPS_WINDOW_S = 5.0
# Closed sessions remembered so that frames still in flight at close do not reopen them.
_RECENTLY_CLOSED_MAX = 1024


@dataclass(frozen=True)
class MonitorConfig:
    sample_interval_s: float = 1.0
    window_s: float = 30.0
    budget_ms: float = 150.0
    event_log: Path | None = None
    event_log_max_bytes: int = 5_000_000
    degradation: DegradationConfig = DegradationConfig()
    nvml: bool = True
    adaptive_sampling: bool = True
    event_log_backups: int = 3
    event_ring: int = 500
    event_interval_s: float = 5.0  # rate limit per (kind, session) for noisy events
    drop_event_fraction: float = 0.10  # "drops" event when a session drops more than this over 5 s
    drop_event_min_frames: int = 30  # ... and saw at least this many frames in those 5 s
    memory_event_fraction: float = 0.95  # "out_of_memory" event when RAM or VRAM use passes this
    loop_lag_interval_s: float = 0.25
    series_points: int = 300
    max_closed_sessions: int = 20
    parallelism: float = 1.0  # frames the pipeline works on at once, for the capacity estimate
    cpu_cores: float | None = None  # cores this process may use (None: affinity + cgroup quota, read once)
    capacity_window_s: float = 10.0  # process CPU / GPU use averaged over this long for the capacity estimate
    capacity_target: float = 0.9  # capacity = sessions at this use of the binding resource


@dataclass
class _Session:
    session_id: str
    info: dict[str, object]
    opened: float
    server: RollingWindow
    rate_in: RateCounter
    rate_out: RateCounter
    rate_drop: RateCounter
    frames_in: int = 0
    frames_out: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_REASONS, 0))
    width: int = 0
    height: int = 0
    closed: float | None = None
    close_reason: str = ""
    link: LinkState | None = None


class Monitor:
    def __init__(
        self,
        config: MonitorConfig,
        clock: Callable[[], float] = time.monotonic,
        governor: Governor | None = None,
    ) -> None:
        self.config = config
        # fed each sample; its own unless the app shares one with the sessions
        self.governor = governor or Governor(config.degradation, config.budget_ms, config.capacity_target)
        self._clock = clock
        self._lock = threading.Lock()
        self._scheduler_stats: Callable[[], Mapping[str, float]] | None = None
        writer = (
            JsonlRotatingWriter(config.event_log, config.event_log_max_bytes, config.event_log_backups)
            if config.event_log is not None
            else None
        )
        self.events = EventLog(config.event_ring, writer)
        self._limiter = RateLimiter(config.event_interval_s)
        w = config.window_s
        self._server = RollingWindow(w, 8192)
        self._stages: dict[str, RollingWindow] = {}
        self._stage_hists: dict[str, CumulativeHistogram] = {}
        self._server_hist = CumulativeHistogram()
        self._batch: dict[str, RollingWindow] = {}
        self._batch_points: dict[str, deque[tuple[int, float]]] = {}
        self._work = RollingWindow(w, 4096)
        self._proc_cpu = RollingWindow(w, 1024)  # process CPU in cores, one value per sample
        self._free_cpu = RollingWindow(w, 1024)  # cores left to this process: the machine minus the others
        self._gpu_busy = RollingWindow(w, 1024)  # busiest GPU's utilisation fraction, one per sample
        self._idle_cpu: float | None = None  # process CPU (cores) with no session open: the baseline
        self._cpu_cores = config.cpu_cores if config.cpu_cores else usable_cores()
        self._shed = RollingWindow(w, 16384)  # per frame: 1.0 dropped (stale/deadline), 0.0 processed
        self._rate_in = RateCounter(FPS_WINDOW_S, 16384)
        self._rate_out = RateCounter(FPS_WINDOW_S, 16384)
        self._lag = RollingWindow(w, 1024)
        self._received = 0
        self._processed = 0
        self._dropped = dict.fromkeys(DROP_REASONS, 0)
        self._rejects: dict[str, int] = {}
        self._sessions: dict[str, _Session] = {}
        self._closed_sessions: deque[_Session] = deque(maxlen=config.max_closed_sessions)
        self._recently_closed: dict[str, _Session] = {}  # insertion-ordered, bounded
        self._series = SeriesRing(config.series_points)
        self._sample: SystemSample | None = None
        self._rss_peak = 0
        self._vram_peak = 0
        self._started: float | None = None
        self._record_s = 0.0
        self._record_n = 0
        self._snapshot_s = 0.0
        self._sampler = SamplerThread(
            self.ingest_sample,
            config.sample_interval_s,
            nvml=config.nvml,
            clock=clock,
            adaptive=config.adaptive_sampling,
        )
        self._lag_task: asyncio.Task[None] | None = None
        self._closed = False

    # ---- lifecycle -----
    async def start(self) -> None:
        if self._started is not None or self._closed:
            return
        self._started = self._clock()
        self._sampler.start()
        self._lag_task = asyncio.get_running_loop().create_task(
            self._measure_loop_lag(), name="monitor-loop-lag"
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._lag_task is not None:
            self._lag_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lag_task
            self._lag_task = None
        await asyncio.to_thread(self._sampler.stop)
        self.events.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def sampler(self) -> SamplerThread:
        return self._sampler

    @property
    def gpu_reader(self) -> GpuReader:
        return self._sampler.gpu_reader

    async def _measure_loop_lag(self) -> None:
        """A task that asks to sleep a fixed time; how late it wakes is how long the loop was busy
        elsewhere."""
        interval = self.config.loop_lag_interval_s
        while True:
            t0 = time.monotonic()
            await asyncio.sleep(interval)
            lag_ms = max(0.0, (time.monotonic() - t0 - interval) * 1000.0)
            with self._lock:
                self._lag.add(self._clock(), lag_ms)

    # ---- media path -----
    def _session(self, session_id: str, now: float) -> _Session:
        s = self._sessions.get(session_id)
        if s is None:
            late = self._recently_closed.get(session_id)
            if late is not None:  # a frame still in flight at close: count it, do not reopen the session
                return late
            s = _Session(
                session_id,
                {},
                now,
                RollingWindow(self.config.window_s, 2048),
                RateCounter(FPS_WINDOW_S),
                RateCounter(FPS_WINDOW_S),
                RateCounter(FPS_WINDOW_S),
            )
            self._sessions[session_id] = s
        return s

    def record_frame(self, rec: FrameRecord) -> None:
        t_start = time.perf_counter()
        now = self._clock()
        emit: tuple[str, str, dict[str, object]] | None = None
        with self._lock:
            s = self._session(rec.session_id, now)
            self._received += 1
            s.frames_in += 1
            self._rate_in.add(now)
            s.rate_in.add(now)
            if rec.width:
                s.width, s.height = rec.width, rec.height
            if rec.outcome is not Outcome.ERROR:
                self._shed.add(now, 0.0 if rec.outcome is Outcome.PROCESSED else 1.0)
            if rec.outcome is Outcome.PROCESSED:
                self._processed += 1
                s.frames_out += 1
                self._rate_out.add(now)
                s.rate_out.add(now)
                self._server.add(now, rec.server_ms)
                self._server_hist.observe(rec.server_ms)
                s.server.add(now, rec.server_ms)
                work = 0.0
                for stage, ms in rec.stages_ms.items():
                    win = self._stages.get(stage)
                    if win is None:
                        win = self._stages[stage] = RollingWindow(self.config.window_s, 4096)
                        self._stage_hists[stage] = CumulativeHistogram()
                    win.add(now, ms)
                    self._stage_hists[stage].observe(ms)
                    if stage in rec.batch_sizes:  # the batch worker's share; codecs run on other threads
                        work += ms / max(1, rec.batch_sizes[stage])
                for stage, b in rec.batch_sizes.items():
                    bw = self._batch.get(stage)
                    if bw is None:
                        bw = self._batch[stage] = RollingWindow(self.config.window_s, 2048)
                        self._batch_points[stage] = deque(maxlen=512)
                    bw.add(now, float(b))
                    if stage in rec.stages_ms:
                        self._batch_points[stage].append((b, rec.stages_ms[stage]))
                self._work.add(now, work)
            else:
                reason = rec.outcome.value
                self._dropped[reason] = self._dropped.get(reason, 0) + 1
                s.dropped[reason] = s.dropped.get(reason, 0) + 1
                s.rate_drop.add(now)
                if rec.outcome is Outcome.DROPPED_DEADLINE:
                    emit = (
                        ev.DEADLINE_MISS,
                        f"session {rec.session_id}: frame {rec.frame_id} missed the "
                        f"{self.config.budget_ms:g} ms deadline",
                        {"session_id": rec.session_id},
                    )
                elif rec.outcome is Outcome.ERROR:
                    emit = (
                        ev.ENGINE_ERROR,
                        f"session {rec.session_id}: frame {rec.frame_id} failed in the engine",
                        {"session_id": rec.session_id},
                    )
            if emit is not None:
                key = f"{emit[0]}:{rec.session_id}"
                if self._limiter.allow(key, now):
                    emit[2]["suppressed_since_last"] = self._limiter.take_suppressed(key)
                else:
                    emit = None
            self._record_s += time.perf_counter() - t_start
            self._record_n += 1
        if emit is not None:
            self.events.emit(now, emit[0], emit[1], emit[2])

    def session_opened(self, session_id: str, info: dict[str, object]) -> None:
        now = self._clock()
        with self._lock:
            s = self._session(session_id, now)
            s.info = dict(info)
            s.opened = now
        self.events.emit(
            now,
            ev.SESSION_OPEN,
            f"session {session_id} opened",
            {"session_id": session_id, **{k: v for k, v in info.items() if _jsonable(v)}},
        )

    def session_link(self, session_id: str, link: LinkState) -> None:
        """The session's processed stream on the network now (sent about once a second)."""
        with self._lock:
            s = self._sessions.get(session_id)
            if s is not None:
                s.link = link

    def session_closed(self, session_id: str, reason: str) -> None:
        now = self._clock()
        with self._lock:
            s = self._sessions.pop(session_id, None)
            if s is None:
                return
            s.closed, s.close_reason = now, reason
            self._closed_sessions.append(s)
            self._recently_closed[session_id] = s
            while len(self._recently_closed) > _RECENTLY_CLOSED_MAX:
                self._recently_closed.pop(next(iter(self._recently_closed)))
            data: dict[str, object] = {
                "session_id": session_id,
                "reason": reason,
                "frames_in": s.frames_in,
                "frames_out": s.frames_out,
                "dropped": dict(s.dropped),
                "duration_s": round(now - s.opened, 3),
            }
        self.events.emit(now, ev.SESSION_CLOSE, f"session {session_id} closed ({reason})", data)

    def record_reject(self, reason: str) -> None:
        now = self._clock()
        with self._lock:
            self._rejects[reason] = self._rejects.get(reason, 0) + 1
            allowed = self._limiter.allow(f"reject:{reason}", now)
            suppressed = self._limiter.take_suppressed(f"reject:{reason}") if allowed else 0
        if allowed:
            self.events.emit(
                now,
                ev.REJECT,
                f"session rejected ({reason})",
                {"reason": reason, "suppressed_since_last": suppressed},
            )

    def event(self, kind: str, message: str, **data: object) -> None:
        self.events.emit(self._clock(), kind, message, data)

    def ingest_sample(self, sample: SystemSample) -> None:
        """Called by the sampler thread each tick (tests call it directly): latest readings, peaks, chart
        point,
        controller step, threshold events."""
        now = sample.mono
        cfg = self.config
        out: list[tuple[str, str, dict[str, object]]] = []
        with self._lock:
            self._sample = sample
            cores_used = sample.process_cpu_percent / 100.0
            self._proc_cpu.add(now, cores_used)
            if sample.cpu_per_core:  # other processes' CPU is not ours to plan with (a shared or busy node)
                machine = float(len(sample.cpu_per_core))
                others = max(0.0, sample.cpu_percent / 100.0 * machine - cores_used)
                self._free_cpu.add(now, max(0.1, machine - others))
            utils = [d.util_percent for d in sample.gpu.devices if d.util_percent is not None]
            if utils:
                self._gpu_busy.add(now, max(utils) / 100.0)
            if not any(x.closed is None for x in self._sessions.values()):
                idle = self._idle_cpu
                self._idle_cpu = cores_used if idle is None else idle + 0.2 * (cores_used - idle)
            self._rss_peak = max(self._rss_peak, sample.rss_bytes)
            vram_frac = sample.gpu.max_mem_fraction()
            for d in sample.gpu.devices:
                if d.mem_used_bytes is not None:
                    self._vram_peak = max(self._vram_peak, d.mem_used_bytes)
            recent = self._server.values(now, cfg.degradation.p95_window_s)
            p95 = summarize(recent).p95 if len(recent) >= cfg.degradation.min_frames else None
            shed = self._shed.values(now, cfg.degradation.p95_window_s)
            drops = sum(shed) / len(shed) if len(shed) >= cfg.degradation.min_frames else None
            decision = self.governor.update(ControllerInput(now, p95, vram_frac, cfg.budget_ms, drops))
            if decision.changed:
                out.append(
                    (
                        ev.DEGRADATION,
                        f"degradation level {decision.previous} -> {decision.level} "
                        f"({LEVEL_NAMES[decision.level]}): {decision.reason}",
                        {
                            "from": decision.previous,
                            "to": decision.level,
                            "name": LEVEL_NAMES[decision.level],
                            "reason": decision.reason,
                        },
                    )
                )
            for s in self._sessions.values():
                n_in = s.rate_in.count(now)
                n_drop = s.rate_drop.count(now)
                if n_in >= cfg.drop_event_min_frames and n_drop / n_in > cfg.drop_event_fraction:
                    if self._limiter.allow(f"drops:{s.session_id}", now):
                        out.append(
                            (
                                ev.DROPS,
                                f"session {s.session_id} dropped {n_drop} of its last {n_in} "
                                f"frames ({100 * n_drop / n_in:.0f}%)",
                                {
                                    "session_id": s.session_id,
                                    "dropped_recent": n_drop,
                                    "frames_recent": n_in,
                                    "dropped_total": dict(s.dropped),
                                },
                            )
                        )
            mem_frac = sample.mem_percent / 100.0
            if mem_frac > cfg.memory_event_fraction and self._limiter.allow("oom:ram", now):
                out.append(
                    (
                        ev.OUT_OF_MEMORY,
                        f"system memory at {sample.mem_percent:.0f}%",
                        {"mem_percent": sample.mem_percent, "rss_bytes": sample.rss_bytes},
                    )
                )
            if (
                vram_frac is not None
                and vram_frac > cfg.memory_event_fraction
                and self._limiter.allow("oom:vram", now)
            ):
                out.append(
                    (ev.OUT_OF_MEMORY, f"VRAM at {100 * vram_frac:.0f}%", {"vram_fraction": vram_frac})
                )
            gpu0 = sample.gpu.devices[0] if sample.gpu.devices else None
            self._series.append(
                {
                    "t": round(now - (self._started if self._started is not None else now), 2),
                    "cpu": sample.cpu_percent,
                    "proc_cpu": sample.process_cpu_percent,
                    "rss": float(sample.rss_bytes),
                    "mem_percent": sample.mem_percent,
                    "gpu_util": None if gpu0 is None else gpu0.util_percent,
                    "vram_percent": None if vram_frac is None else round(100 * vram_frac, 2),
                    "server_p95": None if p95 is None else round(p95, 2),
                    "fps_in": self._rate_in.rate(now),
                    "fps_out": self._rate_out.rate(now),
                    "level": float(self.governor.level),
                }
            )
        for kind, msg, data in out:
            self.events.emit(now, kind, msg, data)

    # ---- stats -----
    def session_stats(self, session_id: str) -> dict[str, object]:
        now = self._clock()
        with self._lock:
            s = self._sessions.get(session_id)
            if s is None:
                s = next((c for c in self._closed_sessions if c.session_id == session_id), None)
            if s is None:
                raise KeyError(session_id)
            return self._session_stats(s, now).to_dict()

    def _session_stats(self, s: _Session, now: float) -> SessionStats:
        end = s.closed if s.closed is not None else now
        return SessionStats(
            session_id=s.session_id,
            open=s.closed is None,
            info=dict(s.info),
            age_s=end - s.opened,
            frames_in=s.frames_in,
            frames_out=s.frames_out,
            dropped=dict(s.dropped),
            fps_in=s.rate_in.rate(end),
            fps_out=s.rate_out.rate(end),
            server_ms=s.server.summary(end),
            width=s.width,
            height=s.height,
            close_reason=s.close_reason,
            link=s.link if s.closed is None else None,
        )

    def _capacity_locked(self, now: float, work_ms: float | None, sessions: int) -> CapacityEstimate:
        """Everything a session costs (gateway.control.capacity): process CPU, GPU, batch workers."""
        cfg = self.config
        within = cfg.capacity_window_s
        resources: list[ResourceUse] = []
        cpu = self._proc_cpu.values(now, within)
        if cpu:
            free = self._free_cpu.values(now, within)
            cores = min(self._cpu_cores, sum(free) / len(free)) if free else self._cpu_cores
            resources.append(ResourceUse("cpu", sum(cpu) / len(cpu), cores, self._idle_cpu or 0.0))
        gpu = self._gpu_busy.values(now, within)
        if gpu:
            resources.append(ResourceUse("gpu", sum(gpu) / len(gpu), 1.0))
        if work_ms:
            busy = work_ms * self._rate_in.rate(now) / 1000.0  # worker-seconds per second
            resources.append(ResourceUse("workers", busy, cfg.parallelism))
        return self.governor.capacity(resources, sessions)

    def watch_scheduler(self, stats: Callable[[], Mapping[str, float]]) -> None:
        """Include the batcher's counters (why batches left, sizes) in every snapshot. Snapshots must then be
        taken on the scheduler's event loop thread (the HTTP handlers are)."""
        self._scheduler_stats = stats

    def snapshot(self) -> StatsSnapshot:
        t0 = time.thread_time()
        scheduler = dict(self._scheduler_stats()) if self._scheduler_stats is not None else {}
        now = self._clock()
        cfg = self.config
        with self._lock:
            server_vals = self._server.values(now)
            sessions = tuple(self._session_stats(s, now) for s in self._sessions.values()) + tuple(
                self._session_stats(s, now) for s in reversed(self._closed_sessions)
            )
            fps_open = [x.fps_in for x in sessions if x.open and x.fps_in > 0]
            fps_per_session = sum(fps_open) / len(fps_open) if fps_open else None
            work = self._work.summary(now)
            work_ms = work.mean if work.count else None
            cap = self._capacity_locked(now, work_ms, len(fps_open))
            capacity = cap.capacity_sessions
            degradation = DegradationState(
                enabled=cfg.degradation.enabled,
                level=self.governor.level,
                level_name=LEVEL_NAMES[self.governor.level],
                admits_new_sessions=self.governor.admits_new_sessions(),
                recommended_max_batch=self.governor.recommended_max_batch(self._batch_points.values()),
                capacity_sessions=capacity,
                work_ms_per_frame=work_ms,
                fps_per_session=None if fps_per_session is None else round(fps_per_session, 3),
                steps=self.governor.steps,
                utilisation=round(cap.utilisation, 4),
                capacity_binding=cap.binding,
                capacity_by_resource=dict(cap.per_resource),
            )
            sample = self._sample
            uptime = now - self._started if self._started is not None else 0.0
            sampler_cpu = self._sampler.cpu_s
            cost = MonitorCost(
                cpu_fraction_of_core=((sampler_cpu + self._record_s + self._snapshot_s) / uptime)
                if uptime > 0
                else 0.0,
                sampler_cpu_s=sampler_cpu,
                record_cpu_s=self._record_s,
                snapshot_cpu_s=self._snapshot_s,
                record_us_per_frame=(1e6 * self._record_s / self._record_n) if self._record_n else 0.0,
                samples=self._sampler.samples,
                sampler_errors=self._sampler.errors,
                event_write_errors=self.events.write_errors,
            )
            snap = StatsSnapshot(
                time_s=time.time(),
                uptime_s=uptime,
                window_s=cfg.window_s,
                budget_ms=cfg.budget_ms,
                system=sample,
                rss_peak_bytes=self._rss_peak,
                vram_peak_bytes=self._vram_peak,
                loop_lag_ms=self._lag.summary(now),
                gpu=sample.gpu if sample is not None else GpuReading(False, self.gpu_reader.reason),
                frames_received=self._received,
                frames_processed=self._processed,
                dropped=dict(self._dropped),
                fps_in=self._rate_in.rate(now),
                fps_out=self._rate_out.rate(now),
                server_ms=summarize(server_vals),
                stages_ms={k: w.summary(now) for k, w in self._stages.items()},
                histogram_bounds_ms=DEFAULT_LATENCY_BUCKETS_MS,
                histogram_counts=tuple(histogram_counts(server_vals, DEFAULT_LATENCY_BUCKETS_MS)),
                server_hist=_hist(self._server_hist),
                stage_hists={k: _hist(h) for k, h in self._stage_hists.items()},
                batch={k: w.summary(now) for k, w in self._batch.items()},
                sessions=sessions,
                rejects=dict(self._rejects),
                degradation=degradation,
                series=tuple(self._series.points()),
                events=tuple(e.as_dict() for e in self.events.recent(50)),
                event_counts=self.events.counts_by_kind(),
                monitor=cost,
                scheduler=scheduler,
            )
            self._snapshot_s += time.thread_time() - t0
        return snap

    def snapshot_dict(self) -> dict[str, object]:
        return self.snapshot().to_dict()


def _hist(h: CumulativeHistogram) -> HistogramData:
    return HistogramData(buckets=tuple(h.cumulative()), sum=h.total, count=h.count)


def _jsonable(v: object) -> bool:
    return isinstance(v, str | int | float | bool) or v is None
