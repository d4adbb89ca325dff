"""The governor: what the gateway does about its load, decided from the monitor's stats.

The monitor records and reports; once a sample it hands the governor what it measured (latency p95, the
share of shed frames, VRAM, resource use) and the governor steps the degradation level, which sets
admission and every frame's options, and gives the batch-size advice and the capacity estimate. Sessions
depend only on `GovernorLike`. Pure and synchronous; the monitor's lock covers the calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from engines.frames import FrameOptions
from gateway.control.capacity import CapacityEstimate, ResourceUse, estimate
from gateway.control.degradation import (
    ControllerInput,
    Decision,
    DegradationConfig,
    DegradationController,
    admits_new_sessions,
    options_for_level,
    recommend_max_batch,
)


class GovernorLike(Protocol):
    """What a session asks before it opens and for every frame."""

    def frame_options(self, requested: tuple[str, ...]) -> FrameOptions: ...

    def admits_new_sessions(self) -> bool: ...


class Governor:
    def __init__(
        self, degradation: DegradationConfig, budget_ms: float, capacity_target: float = 0.9
    ) -> None:
        self.config = degradation
        self.budget_ms = budget_ms
        self.capacity_target = capacity_target
        self._controller = DegradationController(degradation)

    @property
    def level(self) -> int:
        return self._controller.level

    @property
    def steps(self) -> int:
        return self._controller.steps

    def update(self, measured: ControllerInput) -> Decision:
        """One sample's measurements: the degradation level steps down or up (with hysteresis)."""
        return self._controller.update(measured)

    def frame_options(self, requested: tuple[str, ...]) -> FrameOptions:
        return options_for_level(self._controller.level, requested, self.config)

    def admits_new_sessions(self) -> bool:
        return admits_new_sessions(self._controller.level)

    def recommended_max_batch(self, per_stage: Iterable[Sequence[tuple[int, float]]]) -> int:
        """The largest batch every stage can run within its share of the budget (observed size, ms)."""
        recs = [recommend_max_batch(list(points), self.budget_ms) for points in per_stage if len(points) >= 3]
        return min(recs) if recs else recommend_max_batch([], self.budget_ms)

    def capacity(self, resources: list[ResourceUse], sessions: int) -> CapacityEstimate:
        return estimate(resources, sessions, self.capacity_target)
