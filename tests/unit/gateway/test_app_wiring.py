"""create_app: an app built around an injected monitor is the app production runs (same routes, same
resources), and its resources stop in the reverse of the order they started, after the sessions."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from engines.frames import FrameItem, FrameOutput, SourceFace
from gateway.app import create_app, wait_started
from gateway.background import BackgroundPool
from gateway.config import GatewayConfig, SessionConfig
from gateway.egress.hub import EgressHub
from gateway.listening import routes_of
from gateway.monitoring.monitor import Monitor, MonitorConfig
from gateway.monitoring.null import NullMonitor
from gateway.monitoring.ports import GatewayMonitor
from gateway.monitoring.prometheus import make_registry, render
from gateway.scheduler import FrameScheduler
from gateway.session import SessionManager
from gateway.webhooks.delivery import Webhooks
from gateway.webrtc.interop.ice import IceConfig


def _config() -> GatewayConfig:
    return GatewayConfig(
        host="127.0.0.1", port=0, ice=IceConfig.loopback_only(), sessions=SessionConfig(hardware_codecs=False)
    )


class _Pipeline:
    """Passes frames through; tells `log` when it warms up and closes."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def prepare_source(self, image_rgb: np.ndarray, source_id: str) -> SourceFace:
        return SourceFace(id=source_id, image=image_rgb, faces=1)

    def process(self, items: list[FrameItem]) -> list[FrameOutput]:
        return [FrameOutput(image=item.image, faces=0) for item in items]

    def warmup(self) -> None:
        self.log.append("pipeline.warmup")

    def close(self) -> None:
        self.log.append("pipeline.close")

    def not_ready_engines(self) -> list[str]:
        return []


class _LoggedMonitor(NullMonitor):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    async def start(self) -> None:
        self.log.append("monitor.start")

    async def close(self) -> None:
        self.log.append("monitor.close")
        await super().close()


def test_an_app_with_an_injected_monitor_is_the_production_app() -> None:
    production = create_app(_config())
    injected = create_app(_config(), monitor=NullMonitor(), pipeline=_Pipeline([]))
    assert set(routes_of(injected)) == set(routes_of(production))
    assert {("GET", "/metrics"), ("GET", "/api/stats"), ("GET", "/api/stream"), ("GET", "/dashboard")} <= set(
        routes_of(injected)
    )
    assert len(injected.cleanup_ctx) == len(production.cleanup_ctx) == 4
    assert len(injected.on_shutdown) == len(production.on_shutdown) == 2


def test_the_null_monitor_is_a_gateway_monitor_with_an_empty_snapshot() -> None:
    monitors: list[GatewayMonitor] = [NullMonitor(), Monitor(MonitorConfig(nvml=False))]
    for monitor in monitors:
        json.dumps(monitor.snapshot_dict(), allow_nan=False)
        families = {
            f.name for f in text_string_to_metric_families(render(make_registry(monitor.snapshot)).decode())
        }
        assert {"livefuse_frames", "livefuse_sessions_open", "livefuse_degradation_level"} <= families
    empty = NullMonitor().snapshot()
    assert empty.frames_received == 0 and empty.sessions == () and empty.degradation.admits_new_sessions


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every resource's start and close, in the order they happen."""
    calls: list[str] = []

    def logged(cls: type, name: str, label: str) -> None:
        original: Callable[..., Any] = getattr(cls, name)

        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(label)
            return await original(*args, **kwargs)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(label)
            return original(*args, **kwargs)

        monkeypatch.setattr(cls, name, async_wrapper if inspect.iscoroutinefunction(original) else wrapper)

    for cls, prefix in ((Webhooks, "webhooks"), (EgressHub, "egress"), (FrameScheduler, "scheduler"),
                        (SessionManager, "sessions")):  # fmt: skip
        logged(cls, "start", f"{prefix}.start")
        logged(cls, "close", f"{prefix}.close")
    logged(BackgroundPool, "close", "uploads.close")
    yield calls


async def test_resources_stop_in_reverse_after_the_sessions(log: list[str]) -> None:
    app = create_app(_config(), monitor=_LoggedMonitor(log), pipeline=_Pipeline(log))
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        await wait_started(app, 30)
        assert (await client.get("/readyz")).status == 200
        assert (await client.get("/metrics")).status == 200
        started = list(log)
        log.clear()
    assert started == [
        "webhooks.start",
        "monitor.start",
        "egress.start",
        "pipeline.warmup",
        "scheduler.start",
        "sessions.start",
    ]
    assert log == [
        "sessions.close",  # on_shutdown: every peer connection first
        "egress.close",
        "sessions.close",
        "scheduler.close",
        "uploads.close",
        "pipeline.close",
        "monitor.close",
        "webhooks.close",
    ]


async def test_a_failed_start_up_is_reported_and_undone(log: list[str]) -> None:
    class Broken(_Pipeline):
        def warmup(self) -> None:
            raise RuntimeError("model file is truncated\nsecond line")

    app = create_app(_config(), monitor=_LoggedMonitor(log), pipeline=Broken(log))
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        with pytest.raises(RuntimeError, match="^RuntimeError: model file is truncated$"):
            await wait_started(app, 30)
        response = await client.post("/whip", data="v=0", headers={"Content-Type": "application/sdp"})
        assert response.status == 503 and "failed to start" in await response.text()
        log.clear()
    assert log == ["egress.close", "uploads.close", "pipeline.close", "monitor.close", "webhooks.close"]
