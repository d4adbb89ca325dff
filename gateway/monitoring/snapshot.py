"""`StatsSnapshot`: the one stats object. Prometheus (/metrics), the dashboard (/api/stats, /api/stream) and
the
load generator's report all read it; nothing computes its own numbers.

JSON schema of `StatsSnapshot.to_dict()` (schema_version 1; times in ms unless the name says _s, memory in
bytes;
"summary" = {"count", "mean", "p50", "p95", "p99", "max"} over the rolling window, zeros when count is 0):

    schema_version   int, bumped on any incompatible change
    time_s           wall clock (epoch s) when taken;  uptime_s: since Monitor.start;  window_s: rolling
                      window
    budget_ms        end-to-end budget the gateway works to
    system           {cpu_percent, cpu_per_core[], process_cpu_percent (100 = one core), rss_bytes,
                      rss_peak_bytes, mem_used_bytes, mem_total_bytes, mem_percent, threads,
                      sample_interval_s,
                      loop_lag_ms: summary}           (cpu/mem fields are null before the first sample)
    gpu              {available, reason ("no GPU (...)" when absent), vram_peak_bytes,
                      devices: [{index, name, util_percent, mem_used_bytes, mem_total_bytes, mem_percent,
                      process_mem_bytes, processes_mem_bytes, temperature_c, encoder_percent,
                      decoder_percent}]}
                      (any device field may be null when the board does not support that reading)
    frames           {received, processed, dropped: {stale, deadline, error}, fps_in, fps_out}  (totals since
                      start;
                      fps over the last 5 s, all sessions)
    latency          {server_ms: summary, stages_ms: {stage: summary}, histogram: {bounds_ms[], counts[]}
                      (window counts; counts has len(bounds_ms)+1, the last is the overflow),
                      cumulative: {server_ms: H, stages_ms: {stage: H}}  with H = {buckets: [[le, count]...,
                      ["+Inf", n]], sum, count} never reset (Prometheus histogram semantics)}
    batch            {stage: summary of batch sizes}
    sessions         {open: int, list: [{session_id, open, info, age_s, frames_in, frames_out,
                      dropped: {stale, deadline, error}, fps_in, fps_out, server_ms: summary, width, height,
                      close_reason, send_kbps, path_queue_ms, path_loss}]}     (open sessions, then up to 20
                      recently closed; send_kbps: the processed stream's encoder target, path_*: the worst
                      receiver's queueing delay and loss, gateway.webrtc.congestion.bitrate; None when not
                      sending)
    rejects          {reason: count}  (auth, capacity, bad_request, ...)
    degradation      {enabled, level, level_name, admits_new_sessions, recommended_max_batch,
                      capacity_sessions
                      (null without evidence), work_ms_per_frame, fps_per_session, steps}
    series           [{t (uptime s), cpu, proc_cpu, rss, mem_percent, gpu_util, vram_percent, server_p95,
                      fps_in, fps_out, level}]   chart history, one point per sampler tick, bounded
    events           [{t, seq, kind, message, data}]  the latest 50;  event_counts: {kind: n}
    monitor          {cpu_fraction_of_core, sampler_cpu_s, record_cpu_s, snapshot_cpu_s, record_us_per_frame,
                      samples, sampler_errors, event_write_errors}   what the monitor itself costs
    scheduler        {dispatch_reasons: {full, deadline, max_delay, partner_not_expected, wait_not_worth_it},
                      batches_run, batches_waited, mean_batch_size, est_*_ms, ...}  the batcher's own counters
                      (totals since start; {} before the scheduler exists); why each batch left
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .gpu import GpuReading
from .records import LinkState
from .sampler import SystemSample
from .window import Summary

SCHEMA_VERSION = 1
DROP_REASONS: tuple[str, ...] = ("stale", "deadline", "error")


@dataclass(frozen=True)
class SessionStats:
    session_id: str
    open: bool
    info: dict[str, object]
    age_s: float
    frames_in: int
    frames_out: int
    dropped: dict[str, int]
    fps_in: float
    fps_out: float
    server_ms: Summary
    width: int = 0
    height: int = 0
    close_reason: str = ""
    link: LinkState | None = None  # open sessions with a processed stream going out

    def to_dict(self) -> dict[str, object]:
        return {
            "session_id": self.session_id,
            "open": self.open,
            "info": self.info,
            "age_s": round(self.age_s, 2),
            "frames_in": self.frames_in,
            "frames_out": self.frames_out,
            "dropped": dict(self.dropped),
            "fps_in": self.fps_in,
            "fps_out": self.fps_out,
            "server_ms": self.server_ms.as_dict(),
            "width": self.width,
            "height": self.height,
            "close_reason": self.close_reason,
            "send_kbps": None if self.link is None else round(self.link.send_bps / 1000),
            "path_queue_ms": None
            if self.link is None or self.link.queue_s is None
            else round(self.link.queue_s * 1000.0, 1),
            "path_loss": None if self.link is None or self.link.loss is None else round(self.link.loss, 4),
        }


@dataclass(frozen=True)
class DegradationState:
    enabled: bool
    level: int
    level_name: str
    admits_new_sessions: bool
    recommended_max_batch: int
    capacity_sessions: int | None
    work_ms_per_frame: float | None
    fps_per_session: float | None
    steps: int
    utilisation: float = 0.0  # fraction of the binding resource in use (gateway.control.capacity)
    capacity_binding: str | None = None  # cpu | gpu | workers: what limits first
    capacity_by_resource: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class MonitorCost:
    cpu_fraction_of_core: float
    sampler_cpu_s: float
    record_cpu_s: float
    snapshot_cpu_s: float
    record_us_per_frame: float
    samples: int
    sampler_errors: int
    event_write_errors: int

    def to_dict(self) -> dict[str, object]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class HistogramData:
    """Cumulative buckets [(le, count)] with le = inf last, plus sum and count."""

    buckets: tuple[tuple[float, int], ...]
    sum: float
    count: int

    def to_dict(self) -> dict[str, object]:
        return {
            "buckets": [["+Inf" if b == float("inf") else b, c] for b, c in self.buckets],
            "sum": round(self.sum, 3),
            "count": self.count,
        }


@dataclass(frozen=True)
class StatsSnapshot:
    time_s: float
    uptime_s: float
    window_s: float
    budget_ms: float
    system: SystemSample | None
    rss_peak_bytes: int
    vram_peak_bytes: int
    loop_lag_ms: Summary
    gpu: GpuReading
    frames_received: int
    frames_processed: int
    dropped: dict[str, int]
    fps_in: float
    fps_out: float
    server_ms: Summary
    stages_ms: dict[str, Summary]
    histogram_bounds_ms: tuple[float, ...]
    histogram_counts: tuple[int, ...]
    server_hist: HistogramData
    stage_hists: dict[str, HistogramData]
    batch: dict[str, Summary]
    sessions: tuple[SessionStats, ...]
    rejects: dict[str, int]
    degradation: DegradationState
    series: tuple[dict[str, float | None], ...] = ()
    events: tuple[dict[str, object], ...] = ()
    event_counts: dict[str, int] = field(default_factory=dict)
    monitor: MonitorCost | None = None
    scheduler: dict[str, float] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @property
    def sessions_open(self) -> int:
        return sum(1 for s in self.sessions if s.open)

    def to_dict(self) -> dict[str, object]:
        s = self.system
        system: dict[str, object] = {
            "cpu_percent": None if s is None else s.cpu_percent,
            "cpu_per_core": [] if s is None else list(s.cpu_per_core),
            "process_cpu_percent": None if s is None else s.process_cpu_percent,
            "rss_bytes": None if s is None else s.rss_bytes,
            "rss_peak_bytes": self.rss_peak_bytes,
            "mem_used_bytes": None if s is None else s.mem_used_bytes,
            "mem_total_bytes": None if s is None else s.mem_total_bytes,
            "mem_percent": None if s is None else s.mem_percent,
            "threads": None if s is None else s.threads,
            "sample_interval_s": None if s is None else round(s.interval_s, 3),
            "loop_lag_ms": self.loop_lag_ms.as_dict(),
        }
        gpu = self.gpu.as_dict()
        gpu["vram_peak_bytes"] = self.vram_peak_bytes
        return {
            "schema_version": self.schema_version,
            "time_s": round(self.time_s, 3),
            "uptime_s": round(self.uptime_s, 3),
            "window_s": self.window_s,
            "budget_ms": self.budget_ms,
            "system": system,
            "gpu": gpu,
            "frames": {
                "received": self.frames_received,
                "processed": self.frames_processed,
                "dropped": dict(self.dropped),
                "fps_in": self.fps_in,
                "fps_out": self.fps_out,
            },
            "latency": {
                "server_ms": self.server_ms.as_dict(),
                "stages_ms": {k: v.as_dict() for k, v in self.stages_ms.items()},
                "histogram": {
                    "bounds_ms": list(self.histogram_bounds_ms),
                    "counts": list(self.histogram_counts),
                },
                "cumulative": {
                    "server_ms": self.server_hist.to_dict(),
                    "stages_ms": {k: v.to_dict() for k, v in self.stage_hists.items()},
                },
            },
            "batch": {k: v.as_dict() for k, v in self.batch.items()},
            "sessions": {"open": self.sessions_open, "list": [x.to_dict() for x in self.sessions]},
            "rejects": dict(self.rejects),
            "degradation": self.degradation.to_dict(),
            "series": [dict(p) for p in self.series],
            "events": [dict(e) for e in self.events],
            "event_counts": dict(self.event_counts),
            "monitor": None if self.monitor is None else self.monitor.to_dict(),
            "scheduler": _scheduler_dict(self.scheduler),
        }


def _scheduler_dict(flat: dict[str, float]) -> dict[str, object]:
    """The scheduler's flat counters, with `dispatch_<reason>` gathered under `dispatch_reasons`."""
    prefix = "dispatch_"
    out: dict[str, object] = {k: v for k, v in flat.items() if not k.startswith(prefix)}
    if flat:
        out["dispatch_reasons"] = {k[len(prefix) :]: int(v) for k, v in flat.items() if k.startswith(prefix)}
    return out
