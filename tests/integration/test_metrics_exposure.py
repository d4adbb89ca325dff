"""What /metrics exports about the process and its sessions: livefuse_build_info, the container's own
memory beside the host's, and the per-session families only with --metrics-per-session."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import replace
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import create_app, wait_started
from gateway.http.metrics_listener import MetricsListenerConfig
from gateway.monitoring.container import ContainerCollector, read_cgroup_memory
from gateway.monitoring.monitor import Monitor, MonitorConfig
from gateway.monitoring.records import FrameRecord, LinkState, Outcome
from gateway.webrtc.version_check import installed_version
from tests.harness.fakes import FakePipeline
from tests.harness.gateway import gw_config


async def _scrape(per_session: bool) -> dict[str, list[tuple[dict[str, str], float]]]:
    monitor = Monitor(MonitorConfig(nvml=False, sample_interval_s=0.05))
    config = replace(gw_config(), metrics=MetricsListenerConfig(per_session=per_session))
    app = create_app(config, pipeline=FakePipeline(), monitor=monitor)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        await wait_started(app, 60)
        monitor.session_opened("cam", {})
        for i in range(5):
            monitor.record_frame(FrameRecord(session_id="cam", frame_id=i, arrival_s=time.monotonic(),
                                             outcome=Outcome.PROCESSED, server_ms=20.0))  # fmt: skip
        monitor.session_link("cam", LinkState(send_bps=450_000, queue_s=0.02, loss=0.0))
        families: dict[str, list[tuple[dict[str, str], float]]] = {}
        for _ in range(200):  # until the system sampler's first sample (the host's memory) is in
            response = await client.get("/metrics")
            assert response.status == 200
            text = await response.text()
            families = {
                f.name: [(s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)
            }
            if "livefuse_memory_total_bytes" in families:
                break
            await asyncio.sleep(0.05)
    return families


async def test_per_session_series_only_when_asked_for() -> None:
    default = await _scrape(per_session=False)
    for family in ("livefuse_session_frames", "livefuse_session_send_bits_per_second"):
        assert default.get(family, []) == [], family
    asked = await _scrape(per_session=True)
    frames = {(labels["session"], labels["direction"]): v for labels, v in asked["livefuse_session_frames"]
              if "direction" in labels}  # fmt: skip
    assert frames[("cam", "in")] == 5.0
    assert asked["livefuse_session_send_bits_per_second"] == [({"session": "cam"}, 450_000.0)]


async def test_build_info_and_the_containers_memory_beside_the_hosts() -> None:
    families = await _scrape(per_session=False)
    [(labels, value)] = families["livefuse_build_info"]
    assert value == 1.0
    assert labels == {"version": installed_version("livefuse"), "aiortc": installed_version("aiortc"),
                      "av": installed_version("av")}  # fmt: skip
    assert re.fullmatch(r"1\.\d+\.\d+", labels["aiortc"])
    assert families["livefuse_memory_total_bytes"][0][1] > 0  # the host's, as before
    here = read_cgroup_memory()
    if here is not None:  # this machine's cgroup, as the gateway read it
        assert families["livefuse_container_memory_used_bytes"][0][1] > 0
        assert families["livefuse_container_memory_working_set_bytes"][0][1] > 0


def test_cgroup_v2_and_v1_memory_files(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.current").write_text("3000000000\n")
    (v2 / "memory.max").write_text("4294967296\n")
    (v2 / "memory.stat").write_text("anon 2000000000\nfile 900000000\ninactive_file 500000000\n")
    memory = read_cgroup_memory(str(v2))
    assert memory is not None
    assert (memory.used_bytes, memory.working_set_bytes) == (3_000_000_000, 2_500_000_000)
    assert memory.limit_bytes == 4294967296
    (v2 / "memory.max").write_text("max\n")
    assert read_cgroup_memory(str(v2)).limit_bytes is None  # type: ignore[union-attr]
    v1 = tmp_path / "v1" / "memory"
    v1.mkdir(parents=True)
    (v1 / "memory.usage_in_bytes").write_text("1000\n")
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    (v1 / "memory.stat").write_text("cache 300\ntotal_inactive_file 200\n")
    memory = read_cgroup_memory(str(tmp_path / "v1"))
    assert memory is not None and (memory.used_bytes, memory.working_set_bytes, memory.limit_bytes) == (
        1000, 800, None)  # fmt: skip
    assert read_cgroup_memory(str(tmp_path / "none")) is None
    collector = ContainerCollector({"livefuse": "1", "aiortc": "2", "av": "3"}, lambda: memory)
    names = {m.name for m in collector.collect()}
    assert names == {"livefuse_build_info", "livefuse_container_memory_used_bytes",
                     "livefuse_container_memory_working_set_bytes"}  # fmt: skip
