"""`GatewayMonitor`: what the gateway app needs of its monitor, and the one `AppKey` it is shared under.

Why a protocol: the app wires every monitor the same way (started and closed with the app, fed the
scheduler's counters, its events offered to webhooks, its snapshot behind /metrics, /api/stats and the
dashboard), so an app built around a test monitor has the same routes and resources as one built around
`Monitor`. `NullMonitor` (gateway.monitoring.null) is the smallest monitor that satisfies it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from aiohttp import web

from .events import Event
from .records import FrameRecord, LinkState
from .snapshot import StatsSnapshot


class GatewayMonitor(Protocol):
    # ---- what sessions report (the same calls as gateway.session's MonitorLike) -----
    def record_frame(self, rec: FrameRecord) -> None: ...

    def session_opened(self, session_id: str, info: dict[str, object]) -> None: ...

    def session_closed(self, session_id: str, reason: str) -> None: ...

    def session_link(self, session_id: str, link: LinkState) -> None: ...

    def session_timeline(self, session_id: str, marks: dict[str, float]) -> None: ...

    def record_reject(self, reason: str) -> None: ...

    def event(self, kind: str, message: str, **data: Any) -> None: ...

    def session_stats(self, session_id: str) -> dict[str, Any]: ...

    # ---- lifecycle: started and closed by the app (idempotent close) -----
    async def start(self) -> None: ...

    async def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...

    # ---- what the app feeds in and the exporters read -----
    def watch_scheduler(self, stats: Callable[[], Mapping[str, float]]) -> None: ...

    def on_event(self, listener: Callable[[Event], None]) -> None: ...

    def snapshot(self) -> StatsSnapshot: ...

    def snapshot_dict(self) -> dict[str, object]: ...


MONITOR_KEY = web.AppKey("livefuse_monitor", GatewayMonitor)  # type: ignore[type-abstract]
