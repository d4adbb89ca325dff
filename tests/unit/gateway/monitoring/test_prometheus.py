"""/metrics: Prometheus text from the app's own registry, parsed back with prometheus_client's parser."""

from __future__ import annotations

import time

import numpy as np
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from engines.frames import FrameItem
from gateway.monitoring.monitor import Monitor, MonitorConfig
from gateway.monitoring.prometheus import make_registry, render
from gateway.monitoring.records import FrameRecord, LinkState, Outcome
from gateway.monitoring.routes import setup_monitoring_routes
from gateway.scheduler.partners import DISPATCH_REASONS
from gateway.scheduler.policy import BatchPolicy, SchedulerConfig


def _frames(mon: Monitor, n: int, session: str = "s1") -> None:
    for i in range(n):
        mon.record_frame(
            FrameRecord(
                session_id=session,
                frame_id=i,
                arrival_s=time.monotonic(),
                outcome=Outcome.DROPPED_STALE if i % 10 == 9 else Outcome.PROCESSED,
                server_ms=30.0 + i % 40,
                stages_ms={"decode": 0.5, "face_detector": 8.0, "face_landmarker": 3.5, "encode": 2.0},
                batch_sizes={"face_detector": 4, "face_landmarker": 4},
            )
        )


def _families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_metrics_parse_and_have_stage_histograms_after_frames() -> None:
    mon = Monitor(MonitorConfig(nvml=False))
    _frames(mon, 50)
    mon.record_reject("capacity")
    text = render(make_registry(mon.snapshot)).decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    stage = fams["livefuse_stage_latency_seconds"]
    assert stage.type == "histogram"
    counts = {s.labels["stage"]: s.value for s in stage.samples if s.name.endswith("_count")}
    assert counts == {"decode": 45, "face_detector": 45, "face_landmarker": 45, "encode": 45}
    inf = [
        s
        for s in stage.samples
        if s.name.endswith("_bucket") and s.labels["le"] == "+Inf" and s.labels["stage"] == "face_detector"
    ]
    assert inf[0].value == 45
    le_10ms = [
        s.value
        for s in stage.samples
        if s.name.endswith("_bucket") and s.labels["stage"] == "face_detector" and s.labels["le"] == "0.01"
    ]
    assert le_10ms == [45.0]  # 8 ms <= 10 ms: exported in seconds
    server = fams["livefuse_server_latency_seconds"]
    total = [s.value for s in server.samples if s.name.endswith("_count")]
    assert total == [45.0]
    frames = {
        s.labels["outcome"]: s.value for s in fams["livefuse_frames"].samples if s.name.endswith("_total")
    }
    assert frames == {"received": 50.0, "processed": 45.0}
    drops = {
        s.labels["reason"]: s.value
        for s in fams["livefuse_frames_dropped"].samples
        if s.name.endswith("_total")
    }
    assert drops["stale"] == 5.0
    assert [s.value for s in fams["livefuse_rejects"].samples if s.name.endswith("_total")] == [1.0]
    assert [s.value for s in fams["livefuse_sessions_open"].samples] == [1.0]
    assert fams["livefuse_batches"].type == "counter" and fams["livefuse_batched_frames"].type == "counter"
    # Prometheus conventions: no percents, no windowed quantiles posing as gauges, the standard collectors
    assert not [n for n in fams if n.endswith("_percent") or "window" in n or n.endswith("_fraction")], fams
    assert "process_cpu_seconds" in fams and "process_resident_memory_bytes" in fams
    assert "python_info" in fams
    assert [s.value for s in fams["livefuse_gpu_available"].samples] == [0.0]
    assert "livefuse_recommended_max_batch" in fams and "livefuse_degradation_level" in fams
    assert "livefuse_capacity_sessions" in fams


def test_each_app_has_its_own_registry() -> None:
    a, b = Monitor(MonitorConfig(nvml=False)), Monitor(MonitorConfig(nvml=False))
    _frames(a, 20)
    fa = _families(render(make_registry(a.snapshot)).decode())
    fb = _families(render(make_registry(b.snapshot)).decode())
    count = [
        s.value
        for s in fa["livefuse_server_latency_seconds"].samples  # type: ignore[attr-defined]
        if s.name.endswith("_count")
    ]
    assert count == [18.0]
    assert [
        s.value
        for s in fb["livefuse_server_latency_seconds"].samples  # type: ignore[attr-defined]
        if s.name.endswith("_count")
    ] == [0.0]
    assert REGISTRY.get_sample_value("livefuse_sessions_open") is None  # nothing leaked into the global one


async def test_metrics_route_serves_prometheus_text() -> None:
    mon = Monitor(MonitorConfig(nvml=False, sample_interval_s=0.05))
    app = web.Application()
    setup_monitoring_routes(app, mon)
    await mon.start()
    try:
        _frames(mon, 30, "cam")
        mon.session_opened("cam", {})
        mon.session_link("cam", LinkState(send_bps=450_000, queue_s=0.095, loss=0.01))
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            resp = await client.get("/metrics")
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            fams = _families(await resp.text())
            assert "livefuse_stage_latency_seconds" in fams
            frames = fams["livefuse_session_frames"]
            assert frames.type == "counter"  # type: ignore[attr-defined]
            per_session = {
                (s.labels["session"], s.labels["direction"]): s.value
                for s in frames.samples  # type: ignore[attr-defined]
                if s.name.endswith("_total")
            }
            assert per_session[("cam", "in")] == 30.0
            send = fams["livefuse_session_send_bits_per_second"].samples  # type: ignore[attr-defined]
            queue = fams["livefuse_session_path_queue_seconds"].samples  # type: ignore[attr-defined]
            assert [(s.labels["session"], s.value) for s in send] == [("cam", 450_000.0)]
            assert [s.value for s in queue] == [pytest.approx(0.095)]
        stats = mon.session_stats("cam")
        assert (stats["send_kbps"], stats["path_queue_ms"], stats["path_loss"]) == (450, 95.0, 0.01)
        mon.session_closed("cam", "done")
        assert mon.session_stats("cam")["send_kbps"] is None  # a closed session sends nothing
    finally:
        await mon.close()


def test_grafana_dashboard_uses_only_exported_metrics() -> None:
    import json
    import re
    from pathlib import Path

    from gateway.monitoring.container import CgroupMemory, ContainerCollector
    from gateway.monitoring.gpu import GpuDevice, GpuReading
    from gateway.monitoring.sampler import SystemSample

    mon = Monitor(MonitorConfig(nvml=False))
    _frames(mon, 30)
    mon.record_reject("auth")
    mon.event("x", "an event")
    gpu = GpuReading(True, devices=(GpuDevice(0, "Fake", 50.0, 1, 2, 1, 2, 60.0, 1.0, 1.0),))
    mon.ingest_sample(SystemSample(mono=time.monotonic(), cpu_percent=10.0, cpu_per_core=(10.0,), gpu=gpu))
    exported: set[str] = set()
    registry = make_registry(mon.snapshot)
    # the container's own families (gateway.monitoring.container), as the app registers them beside
    memory = CgroupMemory(used_bytes=3, working_set_bytes=2, limit_bytes=4)
    registry.register(ContainerCollector({"livefuse": "1", "aiortc": "2", "av": "3"}, lambda: memory))
    for fam in text_string_to_metric_families(render(registry).decode()):
        exported.update(s.name for s in fam.samples)
    path = Path(__file__).resolve().parents[4] / "deploy" / "grafana" / "livefuse.json"
    dash = json.loads(path.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    used = {m for e in exprs for m in re.findall(r"livefuse_[a-z_]+", e)}
    assert len(exprs) >= 20 and used
    missing = sorted(m for m in used if m not in exported)
    assert missing == [], f"dashboard queries metrics /metrics does not export: {missing}"


def test_scheduler_dispatch_reasons_reach_the_snapshot_and_metrics() -> None:
    """A watched scheduler's counters appear in /api/stats (grouped) and /metrics (one series per reason)."""
    mon = Monitor(MonitorConfig(nvml=False))
    assert mon.snapshot_dict()["scheduler"] == {}
    pol = BatchPolicy(SchedulerConfig())
    mon.watch_scheduler(pol.stats)
    before = mon.snapshot_dict()["scheduler"]
    assert isinstance(before, dict) and before["dispatch_reasons"] == dict.fromkeys(DISPATCH_REASONS, 0)
    pol.submit("a", 1, FrameItem(image=np.zeros((2, 2, 3), np.uint8), source=None), 0.0, 1e9, 0.0)
    plan = pol.schedule(0.0).plan
    assert plan is not None and plan.reason == "partner_not_expected"  # a lone session never waits
    snap = mon.snapshot_dict()["scheduler"]
    assert isinstance(snap, dict)
    assert snap["dispatch_reasons"]["partner_not_expected"] == 1 and snap["batches_run"] == 1.0
    fams = _families(render(make_registry(mon.snapshot)).decode())
    got = {
        s.labels["reason"]: s.value
        for s in fams["livefuse_batch_dispatch"].samples  # type: ignore[attr-defined]
        if s.name.endswith("_total")
    }
    assert got == {**dict.fromkeys(DISPATCH_REASONS, 0.0), "partner_not_expected": 1.0}
    batches = fams["livefuse_batches"].samples  # type: ignore[attr-defined]
    frames = fams["livefuse_batched_frames"].samples  # type: ignore[attr-defined]
    assert [x.value for x in batches if x.name.endswith("_total")] == [1.0]
    assert [x.value for x in frames if x.name.endswith("_total")] == [1.0]


def test_ratios_are_0_to_1_and_gpu_readings_keep_base_units() -> None:
    from gateway.monitoring.gpu import GpuDevice, GpuReading
    from gateway.monitoring.sampler import SystemSample

    mon = Monitor(MonitorConfig(nvml=False))
    gpu = GpuReading(True, devices=(GpuDevice(0, "Fake", 50.0, 1, 2, 1, 2, 60.0, 25.0, 5.0),))
    mon.ingest_sample(
        SystemSample(mono=time.monotonic(), cpu_percent=40.0, cpu_per_core=(30.0, 50.0), gpu=gpu)
    )
    fams = _families(render(make_registry(mon.snapshot)).decode())

    def values(name: str) -> list[float]:
        return [x.value for x in fams[name].samples]  # type: ignore[attr-defined]

    assert values("livefuse_cpu_usage_ratio") == [pytest.approx(0.4)]
    assert values("livefuse_cpu_core_usage_ratio") == [pytest.approx(0.3), pytest.approx(0.5)]
    assert values("livefuse_gpu_utilization_ratio") == [pytest.approx(0.5)]
    assert values("livefuse_gpu_encoder_utilization_ratio") == [pytest.approx(0.25)]
    assert values("livefuse_gpu_decoder_utilization_ratio") == [pytest.approx(0.05)]
    assert values("livefuse_gpu_temperature_celsius") == [60.0]
    assert 0.0 <= values("livefuse_utilization_ratio")[0] <= 1.0


def test_monotonic_totals_keep_what_ended_parts_counted() -> None:
    from gateway.monitoring.prometheus import MonotonicTotals

    totals = MonotonicTotals()
    assert totals.update({"a": {"n": 5}, "b": {"n": 2}}) == {"n": 7}
    assert totals.update({"a": {"n": 9}}) == {"n": 11}  # b ended at 2: kept
    assert totals.update({"a": {"n": 1}}) == {"n": 12}  # a restarted (count went down): its 9 kept
    assert totals.update({}) == {"n": 12}
    assert totals.update({"c": {"n": 3, "m": 1}}) == {"n": 15, "m": 1}


def test_audio_and_front_counters_never_go_down_when_their_parts_end() -> None:
    from gateway.monitoring.audio_section import AudioSection
    from gateway.monitoring.front_section import FrontSection, FrontStatus

    rows: list[dict[str, object]] = [
        {"session": "a", "audio": True, "audio_packets_in": 100, "sender_reports_stamped": 4},
        {"session": "b", "audio": True, "audio_packets_in": 50},
    ]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AudioSection(lambda: rows).collector())
    status = [FrontStatus(running=True, pid=10, cpu_seconds=2.5)]
    registry.register(FrontSection(lambda: status[0]).collector())

    def read() -> dict[str, float]:
        out = {}
        for fam in text_string_to_metric_families(render(registry).decode()):
            for x in fam.samples:
                key = x.name + (f"{{{x.labels['fate']}}}" if "fate" in x.labels else "")
                out[key] = x.value
        return out

    first = read()
    assert first["livefuse_audio_packets_total{received}"] == 150.0
    assert first["livefuse_audio_sessions"] == 2.0
    assert first["livefuse_front_cpu_seconds_total"] == 2.5
    rows.pop(0)  # session a closed
    status[0] = FrontStatus(running=True, pid=11, cpu_seconds=0.5)  # the front restarted
    second = read()
    assert second["livefuse_audio_packets_total{received}"] == 150.0
    assert second["livefuse_sender_reports_stamped_total"] == 4.0
    assert second["livefuse_audio_sessions"] == 1.0  # a gauge: what is open now
    assert second["livefuse_front_cpu_seconds_total"] == 3.0
