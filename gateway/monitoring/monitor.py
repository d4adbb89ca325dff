"""`Monitor`: the one object the gateway reports to: events in, stats, one snapshot out.

Execution lives here (the sampler thread, the event-loop-lag task, the event log and its rate limits); what
was measured lives in stats.py, the snapshot's shape in snapshot.py. What to do about the load is the
governor's (gateway.control): once a sample the monitor hands it the stats' measurements and shows its state.
`record_frame` is called per frame from the media path, possibly from worker threads: one lock, O(stages)
work, never I/O (the events it raises are rate-limited). Nothing here raises into the gateway from a
background activity: sampler failures are counted and shown in the snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gateway.control.capacity import usable_cores
from gateway.control.degradation import LEVEL_NAMES, ControllerInput, Decision, DegradationConfig
from gateway.control.governor import Governor

from . import events as ev
from .events import EventLog, JsonlRotatingWriter, RateLimiter
from .gpu import GpuReader, GpuReading
from .records import FrameRecord, LinkState, Outcome
from .sampler import SamplerThread, SystemSample
from .snapshot import DegradationState, MonitorCost, SessionStats, StatsSnapshot
from .stats import GatewayStats, histogram_data
from .window import DEFAULT_LATENCY_BUCKETS_MS, histogram_counts, summarize

log = logging.getLogger(__name__)


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
        self._stats = GatewayStats(
            config.window_s,
            config.max_closed_sessions,
            config.series_points,
            config.cpu_cores if config.cpu_cores else usable_cores(),
        )
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
    def stats(self) -> GatewayStats:
        """What was measured (read it under no lock only where nothing records, as tests do)."""
        return self._stats

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
                self._stats.lag.add(self._clock(), lag_ms)

    # ---- events in: the media path, sessions, the sampler -----
    def record_frame(self, rec: FrameRecord) -> None:
        t_start = time.perf_counter()
        now = self._clock()
        emit: tuple[str, str, dict[str, object]] | None = None
        with self._lock:
            self._stats.record_frame(rec, now)
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
            s = self._stats.session(session_id, now)
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
            s = self._stats.sessions.get(session_id)
            if s is not None:
                s.link = link

    def session_timeline(self, session_id: str, marks: dict[str, float]) -> None:
        """The session's way on air so far (gateway.session.timeline), shown with its info."""
        with self._lock:
            s = self._stats.sessions.get(session_id)
            if s is not None:
                s.info["timeline_ms"] = dict(marks)

    def session_closed(self, session_id: str, reason: str) -> None:
        now = self._clock()
        with self._lock:
            s = self._stats.close_session(session_id, now, reason)
            if s is None:
                return
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
            self._stats.record_reject(reason)
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

    def on_event(self, listener: Callable[[ev.Event], None]) -> None:
        """`listener(event)` after every event, on the emitting thread (the webhooks queue them)."""
        self.events.subscribe(listener)

    def ingest_sample(self, sample: SystemSample) -> None:
        """Called by the sampler thread each tick (tests call it directly): the stats take the readings,
        the governor takes one step on what they show, threshold events go out, the chart gets a point."""
        now = sample.mono
        cfg = self.config
        deg = cfg.degradation
        stats = self._stats
        out: list[tuple[str, str, dict[str, object]]] = []
        with self._lock:
            stats.record_sample(sample, now)
            vram_frac = sample.gpu.max_mem_fraction()
            p95 = stats.server_p95(now, deg.p95_window_s, deg.min_frames)
            drops = stats.shed_fraction(now, deg.p95_window_s, deg.min_frames)
            decision = self.governor.update(ControllerInput(now, p95, vram_frac, cfg.budget_ms, drops))
            if decision.changed:
                out.append(_degradation_event(decision))
            for a in stats.drop_alerts(now, cfg.drop_event_min_frames, cfg.drop_event_fraction):
                if self._limiter.allow(f"drops:{a.session_id}", now):
                    out.append(
                        (
                            ev.DROPS,
                            f"session {a.session_id} dropped {a.dropped_recent} of its last "
                            f"{a.frames_recent} frames ({100 * a.dropped_recent / a.frames_recent:.0f}%)",
                            {
                                "session_id": a.session_id,
                                "dropped_recent": a.dropped_recent,
                                "frames_recent": a.frames_recent,
                                "dropped_total": a.dropped_total,
                            },
                        )
                    )
            if sample.mem_percent / 100.0 > cfg.memory_event_fraction and self._limiter.allow("oom:ram", now):
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
            stats.series.append(
                {
                    "t": round(now - (self._started if self._started is not None else now), 2),
                    "cpu": sample.cpu_percent,
                    "proc_cpu": sample.process_cpu_percent,
                    "rss": float(sample.rss_bytes),
                    "mem_percent": sample.mem_percent,
                    "gpu_util": None if gpu0 is None else gpu0.util_percent,
                    "vram_percent": None if vram_frac is None else round(100 * vram_frac, 2),
                    "server_p95": None if p95 is None else round(p95, 2),
                    "fps_in": stats.rate_in.rate(now),
                    "fps_out": stats.rate_out.rate(now),
                    "level": float(self.governor.level),
                }
            )
        for kind, msg, data in out:
            self.events.emit(now, kind, msg, data)

    # ---- snapshot out -----
    def session_stats(self, session_id: str) -> dict[str, object]:
        now = self._clock()
        with self._lock:
            s = self._stats.find_session(session_id)
            if s is None:
                raise KeyError(session_id)
            return s.stats(now).to_dict()

    def watch_scheduler(self, stats: Callable[[], Mapping[str, float]]) -> None:
        """Include the batcher's counters (why batches left, sizes) in every snapshot. Snapshots must then be
        taken on the scheduler's event loop thread (the HTTP handlers are)."""
        self._scheduler_stats = stats

    def snapshot(self) -> StatsSnapshot:
        t0 = time.thread_time()
        scheduler = dict(self._scheduler_stats()) if self._scheduler_stats is not None else {}
        now = self._clock()
        cfg = self.config
        st = self._stats
        with self._lock:
            server_vals = st.server.values(now)
            sessions = st.session_stats(now)
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
                system=st.sample,
                rss_peak_bytes=st.rss_peak,
                vram_peak_bytes=st.vram_peak,
                loop_lag_ms=st.lag.summary(now),
                gpu=st.sample.gpu if st.sample is not None else GpuReading(False, self.gpu_reader.reason),
                frames_received=st.received,
                frames_processed=st.processed,
                dropped=dict(st.dropped),
                fps_in=st.rate_in.rate(now),
                fps_out=st.rate_out.rate(now),
                server_ms=summarize(server_vals),
                stages_ms={k: w.summary(now) for k, w in st.stages.items()},
                histogram_bounds_ms=DEFAULT_LATENCY_BUCKETS_MS,
                histogram_counts=tuple(histogram_counts(server_vals, DEFAULT_LATENCY_BUCKETS_MS)),
                server_hist=histogram_data(st.server_hist),
                stage_hists={k: histogram_data(h) for k, h in st.stage_hists.items()},
                batch={k: w.summary(now) for k, w in st.batch.items()},
                sessions=sessions,
                rejects=dict(st.rejects),
                degradation=self._governor_state(now, sessions),
                series=tuple(st.series.points()),
                events=tuple(e.as_dict() for e in self.events.recent(50)),
                event_counts=self.events.counts_by_kind(),
                monitor=cost,
                scheduler=scheduler,
            )
            self._snapshot_s += time.thread_time() - t0
        return snap

    def _governor_state(self, now: float, sessions: tuple[SessionStats, ...]) -> DegradationState:
        """What the governor shows: its level, admission, batch advice and capacity (under the lock)."""
        cfg = self.config
        fps_open = [x.fps_in for x in sessions if x.open and x.fps_in > 0]
        fps_per_session = sum(fps_open) / len(fps_open) if fps_open else None
        work = self._stats.work.summary(now)
        work_ms = work.mean if work.count else None
        resources = self._stats.resource_use(now, cfg.capacity_window_s, work_ms, cfg.parallelism)
        cap = self.governor.capacity(resources, len(fps_open))
        return DegradationState(
            enabled=cfg.degradation.enabled,
            level=self.governor.level,
            level_name=LEVEL_NAMES[self.governor.level],
            admits_new_sessions=self.governor.admits_new_sessions(),
            recommended_max_batch=self.governor.recommended_max_batch(self._stats.batch_points.values()),
            capacity_sessions=cap.capacity_sessions,
            work_ms_per_frame=work_ms,
            fps_per_session=None if fps_per_session is None else round(fps_per_session, 3),
            steps=self.governor.steps,
            utilisation=round(cap.utilisation, 4),
            capacity_binding=cap.binding,
            capacity_by_resource=dict(cap.per_resource),
        )

    def snapshot_dict(self) -> dict[str, object]:
        return self.snapshot().to_dict()


def _degradation_event(decision: Decision) -> tuple[str, str, dict[str, object]]:
    return (
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


def _jsonable(v: object) -> bool:
    return isinstance(v, str | int | float | bool) or v is None
