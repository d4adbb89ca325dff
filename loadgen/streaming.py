"""Percentiles of an endless stream in fixed memory: a log-bucketed histogram.

A run of hours cannot keep every latency and sort them again for each report: memory and CPU would grow with
the run's age, and the load generator shares the machine with what it measures. `LogHistogram` keeps one
count per bucket of ~1 % relative width between `low` and `high` (values outside land in the end buckets and
are still counted), so a percentile is within 1 % of the exact one, memory is fixed, and two histograms add
(per-window histograms make a whole-run one). Exact percentiles of a short run: `loadgen.percentiles`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


class LogHistogram:
    """Counts per log-spaced bucket; `percentile(q)` is the centre of the bucket holding the q-th value."""

    def __init__(self, low: float = 0.01, high: float = 1e6, relative_width: float = 0.01) -> None:
        if not 0 < low < high or not 0 < relative_width < 1:
            raise ValueError("need 0 < low < high and 0 < relative_width < 1")
        self.low = low
        self.high = high
        self.relative_width = relative_width
        self._log_step = math.log1p(relative_width)
        self._buckets = int(math.ceil(math.log(high / low) / self._log_step)) + 1
        self._counts = [0] * self._buckets
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf

    def _index(self, value: float) -> int:
        if value <= self.low:
            return 0
        return min(self._buckets - 1, int(math.log(value / self.low) / self._log_step))

    def add(self, value: float) -> None:
        self._counts[self._index(value)] += 1
        self.count += 1
        self.total += value
        self.min = min(self.min, value)
        self.max = max(self.max, value)

    def extend(self, values: Iterable[float]) -> None:
        for v in values:
            self.add(v)

    def merge(self, other: LogHistogram) -> None:
        """Add `other`'s counts (same bucket layout) into this one."""
        if (other.low, other.high, other.relative_width) != (self.low, self.high, self.relative_width):
            raise ValueError("histograms with different buckets")
        self._counts = [a + b for a, b in zip(self._counts, other._counts, strict=True)]
        self.count += other.count
        self.total += other.total
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def percentile(self, q: float) -> float | None:
        """The q-th percentile (0..100) to within the bucket width, clamped to the values seen; None if
        empty."""
        if not 0 <= q <= 100:
            raise ValueError("q must be in 0..100")
        if not self.count:
            return None
        rank = max(1, math.ceil(q / 100.0 * self.count))
        seen = 0
        for index, n in enumerate(self._counts):
            seen += n
            if seen >= rank:
                if index == 0 and self.min < self.low:  # the underflow bucket: its values are not known
                    return self.min
                if index == self._buckets - 1 and self.max > self.high:  # nor the overflow bucket's
                    return self.max
                centre = self.low * math.exp((index + 0.5) * self._log_step)
                return min(self.max, max(self.min, centre))
        return self.max  # unreachable: the counts sum to `count`

    def percentiles(self, qs: Sequence[float]) -> list[float | None]:
        return [self.percentile(q) for q in qs]

    def __len__(self) -> int:
        return self.count
