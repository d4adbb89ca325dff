"""Typed `web.AppKey`s for the objects `create_app` shares with handlers; what changes while the app runs
is in the one `AppState` under `STATE`."""

from __future__ import annotations

import asyncio
from typing import Protocol

import numpy as np
from aiohttp import web

from engines.frames import FrameItem, FrameOutput, SourceFace
from gateway.background import BackgroundPool
from gateway.config import GatewayConfig
from gateway.engine_watch import EngineWatch
from gateway.errors import Unavailable
from gateway.monitoring.ports import MONITOR_KEY
from gateway.session import SessionManager
from gateway.source_store import SourceStore
from gateway.tenants import Principal


class PipelineLike(Protocol):
    def prepare_source(self, image_rgb: np.ndarray, source_id: str) -> SourceFace: ...

    def process(self, items: list[FrameItem]) -> list[FrameOutput]: ...

    def warmup(self) -> None: ...

    def close(self) -> None: ...

    def not_ready_engines(self) -> list[str]:
        """Engines whose server says they cannot run now (remote backends); [] for in-process ones."""
        ...


class AppState:
    """Mutable bits of the running app (readiness, sources, what the background start-up built); one per app,
    never module-global."""

    def __init__(self, config: GatewayConfig) -> None:
        self.ready = False
        self.shutting_down = False
        self.sources = SourceStore(config.sources)
        self.background = BackgroundPool(config.background)
        self.default_source_id: str | None = None
        # Set by the background start-up (after the app started, so they live here and not under AppKeys).
        self.pipeline: PipelineLike | None = None
        self.sessions: SessionManager | None = None
        self.started = asyncio.Event()  # set when the background start-up finished (well or not)
        self.startup_error: str | None = None  # one line when it failed
        self.engine_watch: EngineWatch | None = None  # remote engines (Triton) only: /readyz follows them


CONFIG = web.AppKey("config", GatewayConfig)
MONITOR = MONITOR_KEY  # the monitor's own key: the app and its monitoring routes share one
STATE = web.AppKey("state", AppState)


PRINCIPAL = web.RequestKey("livefuse_principal", Principal)  # set by the auth middleware


def principal_of(request: web.Request) -> Principal:
    return request.get(PRINCIPAL) or Principal(tenant=None)


def sessions_of(app: web.Application) -> SessionManager:
    """The session manager, or 503 while the gateway is still starting."""
    manager = app[STATE].sessions
    if manager is None:
        raise Unavailable("gateway is starting (models warming up)", retry_after_s=5)
    return manager


def pipeline_of(app: web.Application) -> PipelineLike:
    """The face pipeline, or 503 while the gateway is still starting."""
    pipeline = app[STATE].pipeline
    if pipeline is None:
        raise Unavailable("gateway is starting (models warming up)", retry_after_s=5)
    return pipeline
