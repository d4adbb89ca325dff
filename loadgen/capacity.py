"""Capacity search as pure policy: which concurrency to try next, and when a measurement is stable.

The runner owns the network; these objects only decide (policy apart from execution), so the search
is tested on a simulated latency curve. The search steps N up by `step` until a point misses the SLO (p95 over
budget, or the gateway returns under `min_fps_ratio` of the frames sent), then bisects between the last
passing and the first failing N. A point is measured over consecutive windows until `stable_windows` of them
agree within `tolerance` (perf_analyzer's rule), or `max_windows` were taken; an unstable point is judged on
its last windows and flagged as such.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CapacityConfig:
    budget_ms: float = 150.0
    start: int = 1
    step: int = 2
    max_jobs: int = 64
    min_fps_ratio: float = 0.9
    stable_windows: int = 3
    tolerance: float = 0.10
    max_windows: int = 8

    def __post_init__(self) -> None:
        if self.start < 1 or self.step < 1 or self.max_jobs < self.start:
            raise ValueError("capacity search needs 1 <= start <= max_jobs and step >= 1")
        if self.stable_windows < 1 or self.max_windows < self.stable_windows:
            raise ValueError("max_windows must be >= stable_windows >= 1")


@dataclass(frozen=True)
class WindowMeasure:
    """The two numbers a window contributes to a capacity decision."""

    p95_ms: float | None  # None: nothing came back in the window
    received_ratio: float  # frames returned / frames sent


@dataclass(frozen=True)
class PointResult:
    jobs: int
    p95_ms: float | None
    received_ratio: float
    stable: bool
    windows: int
    ok: bool


def _within(values: list[float], tolerance: float) -> bool:
    mean = sum(values) / len(values)
    if mean == 0:
        return all(v == 0 for v in values)
    return all(abs(v - mean) <= tolerance * abs(mean) for v in values)


@dataclass
class PointMeasurement:
    """Collects windows for one concurrency until they are stable or the window allowance is spent."""

    jobs: int
    config: CapacityConfig
    windows: list[WindowMeasure] = field(default_factory=list)

    def add(self, w: WindowMeasure) -> None:
        self.windows.append(w)

    def _tail(self) -> list[WindowMeasure]:
        return self.windows[-self.config.stable_windows :]

    @property
    def stable(self) -> bool:
        tail = self._tail()
        if len(tail) < self.config.stable_windows:
            return False
        if any(w.p95_ms is None for w in tail):
            # Nothing returns: stable in the sense that matters (it fails), no point in waiting.
            return all(w.p95_ms is None for w in tail)
        p95 = [w.p95_ms for w in tail if w.p95_ms is not None]
        return _within(p95, self.config.tolerance) and _within(
            [w.received_ratio for w in tail], self.config.tolerance
        )

    @property
    def done(self) -> bool:
        return self.stable or len(self.windows) >= self.config.max_windows

    def result(self) -> PointResult:
        tail = self._tail()
        if not tail:
            raise ValueError("no windows measured")
        p95s = [w.p95_ms for w in tail if w.p95_ms is not None]
        p95 = sum(p95s) / len(p95s) if p95s else None
        ratio = sum(w.received_ratio for w in tail) / len(tail)
        ok = p95 is not None and p95 <= self.config.budget_ms and ratio >= self.config.min_fps_ratio
        return PointResult(self.jobs, p95, ratio, self.stable, len(self.windows), ok)


@dataclass
class CapacitySearch:
    """Step up, then bisect. Ask `next_jobs()`, measure it, `report()` the result; None means finished."""

    config: CapacityConfig
    points: list[PointResult] = field(default_factory=list)
    _best_ok: int = 0
    _first_fail: int | None = None

    def next_jobs(self) -> int | None:
        if not self.points:
            return self.config.start
        if self._first_fail is None:
            last = self.points[-1].jobs
            if last >= self.config.max_jobs:
                return None
            return min(last + self.config.step, self.config.max_jobs)
        if self._first_fail - self._best_ok <= 1:
            return None
        lo = max(self._best_ok, self.config.start - 1)
        mid = (lo + self._first_fail) // 2
        if mid <= self._best_ok or mid < self.config.start:
            return None
        return mid

    def report(self, point: PointResult) -> None:
        self.points.append(point)
        if point.ok:
            self._best_ok = max(self._best_ok, point.jobs)
        elif self._first_fail is None or point.jobs < self._first_fail:
            self._first_fail = point.jobs

    @property
    def capacity(self) -> int:
        """The largest N that met the SLO (0 when even the first point failed)."""
        return self._best_ok

    @property
    def finished(self) -> bool:
        return bool(self.points) and self.next_jobs() is None
