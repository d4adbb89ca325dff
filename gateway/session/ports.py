"""What a session depends on: the scheduler it submits frames to and the monitor it reports to."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from engines.frames import FrameItem
from gateway.monitoring.records import FrameRecord, LinkState
from gateway.scheduler import ScheduledFrame


class SchedulerLike(Protocol):
    def submit(
        self, session_id: str, frame_id: int, item: FrameItem, arrival_s: float, deadline_s: float
    ) -> asyncio.Future[ScheduledFrame]: ...

    def remove_session(self, session_id: str) -> None: ...


class MonitorLike(Protocol):
    def record_frame(self, rec: FrameRecord) -> None: ...

    def session_opened(self, session_id: str, info: dict[str, object]) -> None: ...

    def session_closed(self, session_id: str, reason: str) -> None: ...

    def session_link(self, session_id: str, link: LinkState) -> None: ...

    def session_timeline(self, session_id: str, marks: dict[str, float]) -> None: ...

    def record_reject(self, reason: str) -> None: ...

    def event(self, kind: str, message: str, **data: Any) -> None: ...

    def session_stats(self, session_id: str) -> dict[str, Any]: ...
