"""`GatewayStats`: what the gateway measured, in rolling windows and counters, and nothing else.

The monitor feeds it (frames, sessions, rejects, system samples) under its lock and reads it to build the
snapshot and the governor's inputs; it raises no events and decides nothing. Every method is O(stages) or
O(sessions) and takes `now` from the caller, so it is deterministic under a fake clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from gateway.control.capacity import ResourceUse

from .records import FrameRecord, LinkState, Outcome
from .sampler import SystemSample
from .snapshot import DROP_REASONS, HistogramData, SessionStats
from .window import CumulativeHistogram, RateCounter, RollingWindow, SeriesRing, summarize

FPS_WINDOW_S = 5.0
# Closed sessions remembered so that frames still in flight at close do not reopen them.
_RECENTLY_CLOSED_MAX = 1024


@dataclass
class SessionRecord:
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

    def stats(self, now: float) -> SessionStats:
        end = self.closed if self.closed is not None else now
        return SessionStats(
            session_id=self.session_id,
            open=self.closed is None,
            info=dict(self.info),
            age_s=end - self.opened,
            frames_in=self.frames_in,
            frames_out=self.frames_out,
            dropped=dict(self.dropped),
            fps_in=self.rate_in.rate(end),
            fps_out=self.rate_out.rate(end),
            server_ms=self.server.summary(end),
            width=self.width,
            height=self.height,
            close_reason=self.close_reason,
            link=self.link if self.closed is None else None,
        )


@dataclass(frozen=True)
class DropAlert:
    """A session that shed more than its share of frames lately."""

    session_id: str
    dropped_recent: int
    frames_recent: int
    dropped_total: dict[str, int]


class GatewayStats:
    def __init__(
        self, window_s: float, max_closed_sessions: int, series_points: int, cpu_cores: float
    ) -> None:
        self.window_s = window_s
        self.cpu_cores = cpu_cores
        w = window_s
        self.server = RollingWindow(w, 8192)
        self.server_hist = CumulativeHistogram()
        self.stages: dict[str, RollingWindow] = {}
        self.stage_hists: dict[str, CumulativeHistogram] = {}
        self.batch: dict[str, RollingWindow] = {}
        self.batch_points: dict[str, deque[tuple[int, float]]] = {}
        self.work = RollingWindow(w, 4096)  # batch-worker ms per frame
        self.proc_cpu = RollingWindow(w, 1024)  # process CPU in cores, one value per sample
        self.free_cpu = RollingWindow(w, 1024)  # cores left to this process: the machine minus the others
        self.gpu_busy = RollingWindow(w, 1024)  # busiest GPU's utilisation fraction, one per sample
        self.idle_cpu: float | None = None  # process CPU (cores) with no session open: the baseline
        self.shed = RollingWindow(w, 16384)  # per frame: 1.0 dropped (stale/deadline), 0.0 processed
        self.rate_in = RateCounter(FPS_WINDOW_S, 16384)
        self.rate_out = RateCounter(FPS_WINDOW_S, 16384)
        self.lag = RollingWindow(w, 1024)
        self.received = 0
        self.processed = 0
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self.rejects: dict[str, int] = {}
        self.sessions: dict[str, SessionRecord] = {}
        self.closed_sessions: deque[SessionRecord] = deque(maxlen=max_closed_sessions)
        self._recently_closed: dict[str, SessionRecord] = {}  # insertion-ordered, bounded
        self.series = SeriesRing(series_points)
        self.sample: SystemSample | None = None
        self.rss_peak = 0
        self.vram_peak = 0

    # ---- sessions -----
    def session(self, session_id: str, now: float) -> SessionRecord:
        s = self.sessions.get(session_id)
        if s is None:
            late = self._recently_closed.get(session_id)
            if late is not None:  # a frame still in flight at close: count it, do not reopen the session
                return late
            s = SessionRecord(
                session_id,
                {},
                now,
                RollingWindow(self.window_s, 2048),
                RateCounter(FPS_WINDOW_S),
                RateCounter(FPS_WINDOW_S),
                RateCounter(FPS_WINDOW_S),
            )
            self.sessions[session_id] = s
        return s

    def close_session(self, session_id: str, now: float, reason: str) -> SessionRecord | None:
        s = self.sessions.pop(session_id, None)
        if s is None:
            return None
        s.closed, s.close_reason = now, reason
        self.closed_sessions.append(s)
        self._recently_closed[session_id] = s
        while len(self._recently_closed) > _RECENTLY_CLOSED_MAX:
            self._recently_closed.pop(next(iter(self._recently_closed)))
        return s

    def find_session(self, session_id: str) -> SessionRecord | None:
        s = self.sessions.get(session_id)
        if s is None:
            s = next((c for c in self.closed_sessions if c.session_id == session_id), None)
        return s

    def session_stats(self, now: float) -> tuple[SessionStats, ...]:
        """Open sessions, then the closed ones kept, newest first."""
        return tuple(s.stats(now) for s in self.sessions.values()) + tuple(
            s.stats(now) for s in reversed(self.closed_sessions)
        )

    # ---- frames -----
    def record_frame(self, rec: FrameRecord, now: float) -> None:
        s = self.session(rec.session_id, now)
        self.received += 1
        s.frames_in += 1
        self.rate_in.add(now)
        s.rate_in.add(now)
        if rec.width:
            s.width, s.height = rec.width, rec.height
        if rec.outcome is not Outcome.ERROR:
            self.shed.add(now, 0.0 if rec.outcome is Outcome.PROCESSED else 1.0)
        if rec.outcome is not Outcome.PROCESSED:
            reason = rec.outcome.value
            self.dropped[reason] = self.dropped.get(reason, 0) + 1
            s.dropped[reason] = s.dropped.get(reason, 0) + 1
            s.rate_drop.add(now)
            return
        self.processed += 1
        s.frames_out += 1
        self.rate_out.add(now)
        s.rate_out.add(now)
        self.server.add(now, rec.server_ms)
        self.server_hist.observe(rec.server_ms)
        s.server.add(now, rec.server_ms)
        work = 0.0
        for stage, ms in rec.stages_ms.items():
            win = self.stages.get(stage)
            if win is None:
                win = self.stages[stage] = RollingWindow(self.window_s, 4096)
                self.stage_hists[stage] = CumulativeHistogram()
            win.add(now, ms)
            self.stage_hists[stage].observe(ms)
            if stage in rec.batch_sizes:  # the batch worker's share; codecs run on other threads
                work += ms / max(1, rec.batch_sizes[stage])
        for stage, b in rec.batch_sizes.items():
            bw = self.batch.get(stage)
            if bw is None:
                bw = self.batch[stage] = RollingWindow(self.window_s, 2048)
                self.batch_points[stage] = deque(maxlen=512)
            bw.add(now, float(b))
            if stage in rec.stages_ms:
                self.batch_points[stage].append((b, rec.stages_ms[stage]))
        self.work.add(now, work)

    def record_reject(self, reason: str) -> None:
        self.rejects[reason] = self.rejects.get(reason, 0) + 1

    # ---- system samples -----
    def record_sample(self, sample: SystemSample, now: float) -> None:
        """Latest readings, resource use per sample, the idle baseline and the peaks."""
        self.sample = sample
        cores_used = sample.process_cpu_percent / 100.0
        self.proc_cpu.add(now, cores_used)
        if sample.cpu_per_core:  # other processes' CPU is not ours to plan with (a shared or busy node)
            machine = float(len(sample.cpu_per_core))
            others = max(0.0, sample.cpu_percent / 100.0 * machine - cores_used)
            self.free_cpu.add(now, max(0.1, machine - others))
        utils = [d.util_percent for d in sample.gpu.devices if d.util_percent is not None]
        if utils:
            self.gpu_busy.add(now, max(utils) / 100.0)
        if not self.sessions:
            idle = self.idle_cpu
            self.idle_cpu = cores_used if idle is None else idle + 0.2 * (cores_used - idle)
        self.rss_peak = max(self.rss_peak, sample.rss_bytes)
        for d in sample.gpu.devices:
            if d.mem_used_bytes is not None:
                self.vram_peak = max(self.vram_peak, d.mem_used_bytes)

    def server_p95(self, now: float, within_s: float, min_frames: int) -> float | None:
        recent = self.server.values(now, within_s)
        return summarize(recent).p95 if len(recent) >= min_frames else None

    def shed_fraction(self, now: float, within_s: float, min_frames: int) -> float | None:
        shed = self.shed.values(now, within_s)
        return sum(shed) / len(shed) if len(shed) >= min_frames else None

    def drop_alerts(self, now: float, min_frames: int, fraction: float) -> list[DropAlert]:
        alerts = []
        for s in self.sessions.values():
            n_in = s.rate_in.count(now)
            n_drop = s.rate_drop.count(now)
            if n_in >= min_frames and n_drop / n_in > fraction:
                alerts.append(DropAlert(s.session_id, n_drop, n_in, dict(s.dropped)))
        return alerts

    def resource_use(
        self, now: float, within_s: float, work_ms: float | None, parallelism: float
    ) -> list[ResourceUse]:
        """What the sessions cost of each resource (gateway.control.capacity): CPU, GPU, batch workers."""
        resources: list[ResourceUse] = []
        cpu = self.proc_cpu.values(now, within_s)
        if cpu:
            free = self.free_cpu.values(now, within_s)
            cores = min(self.cpu_cores, sum(free) / len(free)) if free else self.cpu_cores
            resources.append(ResourceUse("cpu", sum(cpu) / len(cpu), cores, self.idle_cpu or 0.0))
        gpu = self.gpu_busy.values(now, within_s)
        if gpu:
            resources.append(ResourceUse("gpu", sum(gpu) / len(gpu), 1.0))
        if work_ms:
            busy = work_ms * self.rate_in.rate(now) / 1000.0  # worker-seconds per second
            resources.append(ResourceUse("workers", busy, parallelism))
        return resources


def histogram_data(h: CumulativeHistogram) -> HistogramData:
    return HistogramData(buckets=tuple(h.cumulative()), sum=h.total, count=h.count)
