"""Typed `web.AppKey`s for the objects `create_app` shares with handlers."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from aiohttp import web

from engines.frames import FrameItem, FrameOutput, SourceFace
from gateway.config import GatewayConfig
from gateway.sessions import MonitorLike, SessionManager


class PipelineLike(Protocol):
    def prepare_source(self, image_rgb: np.ndarray, source_id: str) -> SourceFace: ...

    def process(self, items: list[FrameItem]) -> list[FrameOutput]: ...

    def warmup(self) -> None: ...

    def close(self) -> None: ...


class AppState:
    """Mutable bits of the running app (readiness, sources); one per app, never module-global."""

    def __init__(self) -> None:
        self.ready = False
        self.shutting_down = False
        self.sources: dict[str, SourceFace] = {}
        self.default_source_id: str | None = None
        self.extra: dict[str, Any] = {}


CONFIG = web.AppKey("config", GatewayConfig)
SESSIONS = web.AppKey("sessions", SessionManager)
PIPELINE = web.AppKey("pipeline", PipelineLike)  # type: ignore[type-abstract]
MONITOR = web.AppKey("monitor", MonitorLike)  # type: ignore[type-abstract]
STATE = web.AppKey("state", AppState)
