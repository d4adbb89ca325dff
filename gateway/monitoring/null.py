"""`NullMonitor`: a monitor that records nothing and reports an empty snapshot.

Why: tests that inject their own monitor (to see what the gateway reports, or to keep the sampler thread
out) still get the app production gets, with the same routes and the same start-up and shutdown; they
subclass this and override the calls they want to observe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from gateway.control.degradation import LEVEL_NAMES, recommend_max_batch

from .events import Event
from .gpu import GpuReading
from .records import FrameRecord, LinkState
from .snapshot import DegradationState, StatsSnapshot
from .stats import histogram_data
from .window import DEFAULT_LATENCY_BUCKETS_MS, CumulativeHistogram, Summary, histogram_counts


class NullMonitor:
    """Satisfies `GatewayMonitor`; every report is dropped, every snapshot is empty."""

    def __init__(self, budget_ms: float = 150.0) -> None:
        self.budget_ms = budget_ms
        self._closed = False

    def record_frame(self, rec: FrameRecord) -> None:
        pass

    def session_opened(self, session_id: str, info: dict[str, object]) -> None:
        pass

    def session_closed(self, session_id: str, reason: str) -> None:
        pass

    def session_link(self, session_id: str, link: LinkState) -> None:
        pass

    def session_timeline(self, session_id: str, marks: dict[str, float]) -> None:
        pass

    def record_reject(self, reason: str) -> None:
        pass

    def event(self, kind: str, message: str, **data: Any) -> None:
        pass

    def session_stats(self, session_id: str) -> dict[str, Any]:
        return {}

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def watch_scheduler(self, stats: Callable[[], Mapping[str, float]]) -> None:
        pass

    def on_event(self, listener: Callable[[Event], None]) -> None:
        pass  # no event is ever emitted

    def snapshot(self) -> StatsSnapshot:
        bounds = DEFAULT_LATENCY_BUCKETS_MS
        return StatsSnapshot(
            time_s=time.time(),
            uptime_s=0.0,
            window_s=0.0,
            budget_ms=self.budget_ms,
            system=None,
            rss_peak_bytes=0,
            vram_peak_bytes=0,
            loop_lag_ms=Summary(),
            gpu=GpuReading(False, "not monitored"),
            frames_received=0,
            frames_processed=0,
            dropped={},
            fps_in=0.0,
            fps_out=0.0,
            server_ms=Summary(),
            stages_ms={},
            histogram_bounds_ms=bounds,
            histogram_counts=tuple(histogram_counts([], bounds)),
            server_hist=histogram_data(CumulativeHistogram(bounds)),
            stage_hists={},
            batch={},
            sessions=(),
            rejects={},
            degradation=DegradationState(
                enabled=False,
                level=0,
                level_name=LEVEL_NAMES[0],
                admits_new_sessions=True,
                recommended_max_batch=recommend_max_batch([], self.budget_ms),
                capacity_sessions=None,
                work_ms_per_frame=None,
                fps_per_session=None,
                steps=0,
            ),
        )

    def snapshot_dict(self) -> dict[str, object]:
        return self.snapshot().to_dict()
