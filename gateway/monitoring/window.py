"""Rolling statistics with memory bounded whatever the run length (pure: no threads, no clocks of their own).

Every structure takes the current time as an argument, so tests drive them with synthetic clocks and the
monitor
with its own. Bounds: a `RollingWindow` keeps at most `max_samples` values (the oldest go first even if still
inside the time window, which only happens above ~max_samples/window_s events per second); a `SeriesRing`
keeps
a fixed number of chart points; a `CumulativeHistogram` is a fixed array of bucket counts.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

# Latency bucket upper bounds in ms: fine around the 150 ms budget, coarse in the tails.
DEFAULT_LATENCY_BUCKETS_MS: tuple[float, ...] = (
    1,
    2.5,
    5,
    10,
    15,
    20,
    30,
    40,
    50,
    65,
    80,
    100,
    120,
    150,
    200,
    250,
    300,
    400,
    500,
    750,
    1000,
    2000,
    5000,
)


@dataclass(frozen=True)
class Summary:
    """Percentiles of one window; all zero when the window is empty (count tells which)."""

    count: int = 0
    mean: float = 0.0
    p50: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    max: float = 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {
            "count": self.count,
            "mean": self.mean,
            "p50": self.p50,
            "p95": self.p95,
            "p99": self.p99,
            "max": self.max,
        }


def summarize(values: Sequence[float] | np.ndarray) -> Summary:
    """Percentiles with linear interpolation (numpy's default), rounded to keep JSON small."""
    n = len(values)
    if n == 0:
        return Summary()
    arr = np.asarray(values, dtype=np.float64)
    p50, p95, p99 = np.percentile(arr, (50.0, 95.0, 99.0))
    return Summary(
        count=n,
        mean=round(float(arr.mean()), 3),
        p50=round(float(p50), 3),
        p95=round(float(p95), 3),
        p99=round(float(p99), 3),
        max=round(float(arr.max()), 3),
    )


class RollingWindow:
    """Values seen in the last `window_s` seconds (at most `max_samples` of them)."""

    def __init__(self, window_s: float, max_samples: int = 4096) -> None:
        if window_s <= 0 or max_samples <= 0:
            raise ValueError("window_s and max_samples must be positive")
        self.window_s = window_s
        self._items: deque[tuple[float, float]] = deque(maxlen=max_samples)

    def add(self, now: float, value: float) -> None:
        self._items.append((now, value))

    def prune(self, now: float) -> None:
        cutoff = now - self.window_s
        items = self._items
        while items and items[0][0] < cutoff:
            items.popleft()

    def values(self, now: float, within_s: float | None = None) -> list[float]:
        """Values of the last `within_s` seconds (default: the whole window)."""
        self.prune(now)
        if within_s is None or within_s >= self.window_s:
            return [v for _, v in self._items]
        cutoff = now - within_s
        return [v for t, v in self._items if t >= cutoff]

    def summary(self, now: float, within_s: float | None = None) -> Summary:
        return summarize(self.values(now, within_s))

    def count(self, now: float, within_s: float | None = None) -> int:
        self.prune(now)
        if within_s is None:
            return len(self._items)
        cutoff = now - within_s
        return sum(1 for t, _ in self._items if t >= cutoff)

    def __len__(self) -> int:
        return len(self._items)


class RateCounter:
    """Events per second over a sliding window, from exact timestamps (at most `max_events` kept)."""

    def __init__(self, window_s: float, max_events: int = 8192) -> None:
        self.window_s = window_s
        self._times: deque[float] = deque(maxlen=max_events)
        self._first: float | None = None

    def add(self, now: float) -> None:
        if self._first is None:
            self._first = now
        self._times.append(now)
        self._prune(now)  # a counter only ever counted (a session's drops) must not fill up over hours

    def _prune(self, now: float) -> None:
        times = self._times
        while times and times[0] < now - self.window_s:
            times.popleft()

    def __len__(self) -> int:
        return len(self._times)

    def count(self, now: float, within_s: float | None = None) -> int:
        """Events in the last `within_s` seconds (default the window)."""
        span = self.window_s if within_s is None else min(within_s, self.window_s)
        n = 0
        for t in reversed(self._times):
            if t < now - span:
                break
            n += 1
        return n

    def rate(self, now: float, within_s: float | None = None) -> float:
        """Mean rate over `within_s` (default the window), or over the time since the first event if
        shorter."""
        span = self.window_s if within_s is None else min(within_s, self.window_s)
        if self._first is None:
            return 0.0
        self._prune(now)
        times = self._times
        cutoff = now - span
        n = 0
        for t in reversed(times):
            if t < cutoff:
                break
            n += 1
        age = now - self._first
        if age >= span:
            return round(n / span, 3)
        # A young counter: n events span n-1 intervals (counting n over the age would overstate the rate);
        # the 1 s floor keeps a couple of close events from reading as hundreds per second.
        return round(max(n - 1, 0) / max(age, 1.0), 3)


class CumulativeHistogram:
    """Prometheus-style cumulative histogram: fixed buckets, counts only grow (never reset, never bounded)."""

    def __init__(self, bounds: Iterable[float] = DEFAULT_LATENCY_BUCKETS_MS) -> None:
        self.bounds: tuple[float, ...] = tuple(sorted(bounds))
        self._counts = [0] * (len(self.bounds) + 1)  # last bucket is +Inf
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self._counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """[(upper bound, count <= bound)], ending with (inf, total count)."""
        out: list[tuple[float, int]] = []
        acc = 0
        for bound, c in zip((*self.bounds, math.inf), self._counts, strict=True):
            acc += c
            out.append((bound, acc))
        return out

    def as_dict(self) -> dict[str, object]:
        return {
            "buckets": [[("+Inf" if math.isinf(b) else b), c] for b, c in self.cumulative()],
            "sum": round(self.total, 3),
            "count": self.count,
        }


def histogram_counts(values: Sequence[float], bounds: Sequence[float]) -> list[int]:
    """Non-cumulative counts per bucket (values > last bound land in one overflow bucket) for charts."""
    counts = [0] * (len(bounds) + 1)
    for v in values:
        counts[bisect.bisect_left(bounds, v)] += 1
    return counts


class SeriesRing:
    """Fixed-length ring of chart points (time + named values): the dashboard's history on first load."""

    def __init__(self, max_points: int = 300) -> None:
        self._points: deque[dict[str, float | None]] = deque(maxlen=max_points)

    def append(self, point: dict[str, float | None]) -> None:
        self._points.append(point)

    def points(self, last: int | None = None) -> list[dict[str, float | None]]:
        pts = list(self._points)
        return pts if last is None else pts[-last:]

    def __len__(self) -> int:
        return len(self._points)


class Ewma:
    """Exponentially weighted moving average: the sliding average drawn on charts (O(1) state)."""

    def __init__(self, alpha: float = 0.2) -> None:
        if not 0 < alpha <= 1:
            raise ValueError("alpha must be in (0, 1]")
        self.alpha = alpha
        self.value: float | None = None

    def update(self, x: float) -> float:
        self.value = x if self.value is None else self.alpha * x + (1 - self.alpha) * self.value
        return self.value
