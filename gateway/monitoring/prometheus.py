"""Prometheus exposition of the stats snapshot, on the app's OWN `CollectorRegistry` (never the global one, so
two gateways in one process — as in tests — never collide).

A custom collector reads `Monitor.snapshot()` at scrape time instead of mirroring every frame into
prometheus-client metric objects: the monitor already keeps cumulative histograms and counters, so the media
path pays for one set of bookkeeping and /metrics, /api/stats and the dashboard can never disagree.
Prometheus conventions: base units (seconds, bytes), ratios 0-1, latency as histograms (quantiles are
histogram_quantile's job, not windowed gauges), counters that never go down (`MonotonicTotals` carries the
counts of sessions and processes that ended), the standard process_* and python_* collectors.
The JSON keeps ms and percent for people.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import PLATFORM_COLLECTOR, CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .snapshot import HistogramData, StatsSnapshot

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MonotonicTotals:
    """Totals that never go down although their parts end: `update({key: {name: count}})` with the counts of
    the parts alive now (sessions, a process by pid) returns, per name, what every part ever counted. A part
    that is gone is retired at the last counts seen; one whose count went down restarted: retired too.
    """

    def __init__(self) -> None:
        self._retired: dict[str, float] = {}
        self._last: dict[object, Mapping[str, float]] = {}

    def _retire(self, counts: Mapping[str, float]) -> None:
        for name, value in counts.items():
            self._retired[name] = self._retired.get(name, 0.0) + value

    def update(self, alive: Mapping[Any, Mapping[str, float]]) -> dict[str, float]:
        for key in list(self._last):
            if key not in alive:
                self._retire(self._last.pop(key))
        for key, counts in alive.items():
            before = self._last.get(key)
            if before is not None and any(counts.get(n, 0.0) < v for n, v in before.items()):
                self._retire(before)
            self._last[key] = dict(counts)
        totals = dict(self._retired)
        for counts in self._last.values():
            for name, value in counts.items():
                totals[name] = totals.get(name, 0.0) + value
        return totals


def _seconds_buckets(h: HistogramData) -> list[tuple[str, float]]:
    return [("+Inf" if b == float("inf") else repr(b / 1000.0), float(c)) for b, c in h.buckets]


class SnapshotCollector(Collector):
    def __init__(self, snapshot: Callable[[], StatsSnapshot]) -> None:
        self._snapshot = snapshot

    def describe(self) -> list[Metric]:
        return []  # dynamic label sets; nothing to pre-declare (avoids a collect() at registration)

    def collect(self) -> Iterator[Metric]:
        s = self._snapshot()
        yield from _latency(s)
        yield from _counters(s)
        yield from _sessions(s)
        yield from _system(s)
        yield from _gpu(s)
        yield from _control(s)


def _latency(s: StatsSnapshot) -> Iterator[Metric]:
    server = HistogramMetricFamily(
        "livefuse_server_latency_seconds", "Frame arrival to encoder hand-off, processed frames"
    )
    server.add_metric([], _seconds_buckets(s.server_hist), s.server_hist.sum / 1000.0)
    yield server
    stage = HistogramMetricFamily(
        "livefuse_stage_latency_seconds", "Time per stage (the batch's time)", labels=["stage"]
    )
    for name, h in sorted(s.stage_hists.items()):
        stage.add_metric([name], _seconds_buckets(h), h.sum / 1000.0)
    yield stage


def _counters(s: StatsSnapshot) -> Iterator[Metric]:
    """What happened to frames, batches, refused sessions and events since start."""
    frames = CounterMetricFamily("livefuse_frames", "Frames by fate since start", labels=["outcome"])
    frames.add_metric(["received"], s.frames_received)
    frames.add_metric(["processed"], s.frames_processed)
    yield frames
    drops = CounterMetricFamily(
        "livefuse_frames_dropped", "Frames not processed, by reason", labels=["reason"]
    )
    for reason, n in sorted(s.dropped.items()):
        drops.add_metric([reason], n)
    yield drops
    dispatch = CounterMetricFamily(
        "livefuse_batch_dispatch", "Batches started, by why they left the queue", labels=["reason"]
    )
    for key, count in sorted(s.scheduler.items()):
        if key.startswith("dispatch_"):
            dispatch.add_metric([key[len("dispatch_") :]], count)
    yield dispatch
    rejects = CounterMetricFamily("livefuse_rejects", "Sessions refused, by reason", labels=["reason"])
    for reason, n in sorted(s.rejects.items()):
        rejects.add_metric([reason], n)
    yield rejects
    events = CounterMetricFamily("livefuse_events", "Monitor events, by kind", labels=["kind"])
    for kind, n in sorted(s.event_counts.items()):
        events.add_metric([kind], n)
    yield events


def _sessions(s: StatsSnapshot) -> Iterator[Metric]:
    """Open sessions, their frames and links, and the batches the scheduler ran across them."""
    yield GaugeMetricFamily("livefuse_sessions_open", "Open sessions", value=s.sessions_open)
    session_frames = CounterMetricFamily(
        "livefuse_session_frames",
        "Per open session: frames received from the publisher (in) and sent back processed (out)",
        labels=["session", "direction"],
    )
    for x in s.sessions:
        if x.open:
            session_frames.add_metric([x.session_id, "in"], x.frames_in)
            session_frames.add_metric([x.session_id, "out"], x.frames_out)
    yield session_frames
    send = GaugeMetricFamily(
        "livefuse_session_send_bits_per_second",
        "Per open session: the processed stream's encoder target (gateway.webrtc.congestion.bitrate)",
        labels=["session"],
    )
    queue = GaugeMetricFamily(
        "livefuse_session_path_queue_seconds",
        "Per open session: the largest queueing delay its receivers' round trips show",
        labels=["session"],
    )
    for x in s.sessions:
        if x.open and x.link is not None:
            send.add_metric([x.session_id], x.link.send_bps)
            if x.link.queue_s is not None:
                queue.add_metric([x.session_id], x.link.queue_s)
    yield send
    yield queue
    yield CounterMetricFamily(
        "livefuse_batches",
        "Batches run by the cross-session scheduler",
        value=s.scheduler.get("batches_run", 0),
    )
    yield CounterMetricFamily(
        "livefuse_batched_frames",
        "Frames in those batches (mean batch size = rate of this / rate of livefuse_batches_total)",
        value=s.scheduler.get("batched_items", 0),
    )


def _system(s: StatsSnapshot) -> Iterator[Metric]:
    """The machine's CPU and memory, once the sampler has taken a sample."""
    sysm = s.system
    if sysm is None:
        return
    yield GaugeMetricFamily(
        "livefuse_cpu_usage_ratio",
        "Machine CPU in use, 0-1 of all cores",
        value=sysm.cpu_percent / 100,
    )
    core = GaugeMetricFamily("livefuse_cpu_core_usage_ratio", "CPU in use per core, 0-1", labels=["core"])
    for i, v in enumerate(sysm.cpu_per_core):
        core.add_metric([str(i)], v / 100)
    yield core
    yield GaugeMetricFamily("livefuse_process_threads", "Threads in this process", value=sysm.threads)
    yield GaugeMetricFamily("livefuse_memory_used_bytes", "System memory in use", value=sysm.mem_used_bytes)
    yield GaugeMetricFamily("livefuse_memory_total_bytes", "System memory", value=sysm.mem_total_bytes)


def _gpu(s: StatsSnapshot) -> Iterator[Metric]:
    yield GaugeMetricFamily("livefuse_gpu_available", "1 when NVML sees a GPU", value=int(s.gpu.available))
    util = GaugeMetricFamily("livefuse_gpu_utilization_ratio", "GPU busy, 0-1", labels=["gpu"])
    used = GaugeMetricFamily("livefuse_gpu_memory_used_bytes", "GPU memory used", labels=["gpu"])
    total = GaugeMetricFamily("livefuse_gpu_memory_total_bytes", "GPU memory total", labels=["gpu"])
    own = GaugeMetricFamily("livefuse_gpu_process_memory_bytes", "This process's GPU memory", labels=["gpu"])
    temp = GaugeMetricFamily("livefuse_gpu_temperature_celsius", "GPU temperature", labels=["gpu"])
    enc = GaugeMetricFamily("livefuse_gpu_encoder_utilization_ratio", "NVENC busy, 0-1", labels=["gpu"])
    dec = GaugeMetricFamily("livefuse_gpu_decoder_utilization_ratio", "NVDEC busy, 0-1", labels=["gpu"])
    for d in s.gpu.devices:
        lbl = [str(d.index)]
        readings: tuple[tuple[GaugeMetricFamily, float | int | None], ...] = (
            (util, _ratio(d.util_percent)),
            (used, d.mem_used_bytes),
            (total, d.mem_total_bytes),
            (own, d.process_mem_bytes),
            (temp, d.temperature_c),
            (enc, _ratio(d.encoder_percent)),
            (dec, _ratio(d.decoder_percent)),
        )
        for fam, val in readings:
            if val is not None:
                fam.add_metric(lbl, val)
    yield from (util, used, total, own, temp, enc, dec)


def _control(s: StatsSnapshot) -> Iterator[Metric]:
    """What the governor shows (level, batch advice, capacity) and what the monitor itself costs."""
    dg = s.degradation
    yield GaugeMetricFamily("livefuse_degradation_level", "0 full ... 4 refusing sessions", value=dg.level)
    yield GaugeMetricFamily(
        "livefuse_recommended_max_batch",
        "Largest batch that fits the budget",
        value=dg.recommended_max_batch,
    )
    yield GaugeMetricFamily(
        "livefuse_utilization_ratio",
        "Share of the binding resource (process CPU, GPU, batch workers) in use, 0-1; autoscaling signal",
        value=dg.utilisation,
    )
    by_resource = GaugeMetricFamily(
        "livefuse_capacity_sessions_by_resource",
        "Sessions each resource alone could hold",
        labels=["resource"],
    )
    for name, value in dg.capacity_by_resource.items():
        by_resource.add_metric([name], value)
    yield by_resource
    if dg.capacity_sessions is not None:
        yield GaugeMetricFamily(
            "livefuse_capacity_sessions",
            "Sessions this machine can hold at the budget",
            value=dg.capacity_sessions,
        )
    if s.monitor is not None:
        yield GaugeMetricFamily(
            "livefuse_monitor_cpu_usage_ratio",
            "The monitor's own CPU, 0-1 of one core",
            value=s.monitor.cpu_fraction_of_core,
        )


def _ratio(percent: float | int | None) -> float | None:
    return None if percent is None else percent / 100


def make_registry(snapshot: Callable[[], StatsSnapshot]) -> CollectorRegistry:
    """The snapshot's families plus the standard process_* (CPU seconds, resident memory, open files, start
    time) and python_info collectors, on a registry of this app's own."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    ProcessCollector(registry=registry)
    registry.register(PLATFORM_COLLECTOR)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
