"""`StatsSnapshot`: the one stats object. Prometheus (/metrics), the dashboard (/api/stats, /api/stream) and
the load generator's report all read it; nothing computes its own numbers. The JSON of `to_dict()`, field by
field: docs/ARCHITECTURE.md "The stats snapshot"."""

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
