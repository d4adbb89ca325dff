"""Prometheus exposition of the stats snapshot, on the app's OWN `CollectorRegistry` (never the global one, so
two gateways in one process — as in tests — never collide).

A custom collector reads `Monitor.snapshot()` at scrape time instead of mirroring every frame into
prometheus-client metric objects: the monitor already keeps cumulative histograms and counters, so the media
path
pays for one set of bookkeeping and /metrics, /api/stats and the dashboard can never disagree.
Latencies are exported in seconds (Prometheus convention); the JSON keeps ms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .snapshot import HistogramData, StatsSnapshot

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _seconds_buckets(h: HistogramData) -> list[tuple[str, float]]:
    return [("+Inf" if b == float("inf") else repr(b / 1000.0), float(c)) for b, c in h.buckets]


class SnapshotCollector(Collector):
    def __init__(self, snapshot: Callable[[], StatsSnapshot]) -> None:
        self._snapshot = snapshot

    def describe(self) -> list[Metric]:
        return []  # dynamic label sets; nothing to pre-declare (avoids a collect() at registration)

    def collect(self) -> Iterator[Metric]:
        s = self._snapshot()

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

        yield GaugeMetricFamily("livefuse_sessions_open", "Open sessions", value=s.sessions_open)
        fps = GaugeMetricFamily("livefuse_fps", "Frames per second, all sessions (5 s)", labels=["direction"])
        fps.add_metric(["in"], s.fps_in)
        fps.add_metric(["out"], s.fps_out)
        yield fps
        sfps = GaugeMetricFamily(
            "livefuse_session_fps",
            "Frames per second per open session (5 s)",
            labels=["session", "direction"],
        )
        for x in s.sessions:
            if x.open:
                sfps.add_metric([x.session_id, "in"], x.fps_in)
                sfps.add_metric([x.session_id, "out"], x.fps_out)
        yield sfps
        send = GaugeMetricFamily(
            "livefuse_session_send_bitrate_bps",
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
        p = GaugeMetricFamily(
            "livefuse_server_latency_window_seconds",
            "Server time percentiles over the window",
            labels=["quantile"],
        )
        for q, v in (("0.5", s.server_ms.p50), ("0.95", s.server_ms.p95), ("0.99", s.server_ms.p99)):
            p.add_metric([q], v / 1000.0)
        yield p
        batch = GaugeMetricFamily(
            "livefuse_batch_size", "Mean batch size per stage (window)", labels=["stage"]
        )
        for name, b in sorted(s.batch.items()):
            batch.add_metric([name], b.mean)
        yield batch

        sysm = s.system
        if sysm is not None:
            yield GaugeMetricFamily("livefuse_cpu_percent", "Machine CPU utilisation", value=sysm.cpu_percent)
            core = GaugeMetricFamily("livefuse_cpu_core_percent", "CPU utilisation per core", labels=["core"])
            for i, v in enumerate(sysm.cpu_per_core):
                core.add_metric([str(i)], v)
            yield core
            yield GaugeMetricFamily(
                "livefuse_process_cpu_percent", "This process, 100 = one core", value=sysm.process_cpu_percent
            )
            yield GaugeMetricFamily("livefuse_process_rss_bytes", "Resident memory", value=sysm.rss_bytes)
            yield GaugeMetricFamily("livefuse_process_threads", "Threads in this process", value=sysm.threads)
            yield GaugeMetricFamily(
                "livefuse_memory_used_bytes", "System memory in use", value=sysm.mem_used_bytes
            )
            yield GaugeMetricFamily(
                "livefuse_memory_total_bytes", "System memory", value=sysm.mem_total_bytes
            )
        yield GaugeMetricFamily(
            "livefuse_event_loop_lag_seconds",
            "Event-loop lag p95 over the window",
            value=s.loop_lag_ms.p95 / 1000,
        )

        yield GaugeMetricFamily(
            "livefuse_gpu_available", "1 when NVML sees a GPU", value=int(s.gpu.available)
        )
        util = GaugeMetricFamily("livefuse_gpu_utilization_percent", "GPU utilisation", labels=["gpu"])
        used = GaugeMetricFamily("livefuse_gpu_memory_used_bytes", "GPU memory used", labels=["gpu"])
        total = GaugeMetricFamily("livefuse_gpu_memory_total_bytes", "GPU memory total", labels=["gpu"])
        own = GaugeMetricFamily(
            "livefuse_gpu_process_memory_bytes", "This process's GPU memory", labels=["gpu"]
        )
        temp = GaugeMetricFamily("livefuse_gpu_temperature_celsius", "GPU temperature", labels=["gpu"])
        enc = GaugeMetricFamily("livefuse_gpu_encoder_percent", "NVENC utilisation", labels=["gpu"])
        dec = GaugeMetricFamily("livefuse_gpu_decoder_percent", "NVDEC utilisation", labels=["gpu"])
        for d in s.gpu.devices:
            lbl = [str(d.index)]
            readings: tuple[tuple[GaugeMetricFamily, float | int | None], ...] = (
                (util, d.util_percent),
                (used, d.mem_used_bytes),
                (total, d.mem_total_bytes),
                (own, d.process_mem_bytes),
                (temp, d.temperature_c),
                (enc, d.encoder_percent),
                (dec, d.decoder_percent),
            )
            for fam, val in readings:
                if val is not None:
                    fam.add_metric(lbl, val)
        yield from (util, used, total, own, temp, enc, dec)

        dg = s.degradation
        yield GaugeMetricFamily(
            "livefuse_degradation_level", "0 full ... 4 refusing sessions", value=dg.level
        )
        yield GaugeMetricFamily(
            "livefuse_recommended_max_batch",
            "Largest batch that fits the budget",
            value=dg.recommended_max_batch,
        )
        yield GaugeMetricFamily(
            "livefuse_utilisation",
            "Fraction of the binding resource (process CPU, GPU, batch workers) in use; autoscaling signal",
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
                "livefuse_monitor_cpu_fraction",
                "Monitor's own CPU, fraction of one core",
                value=s.monitor.cpu_fraction_of_core,
            )


def make_registry(snapshot: Callable[[], StatsSnapshot]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
