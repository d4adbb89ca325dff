"""A delay-gradient overuse detector, after libwebrtc's goog_cc TrendlineEstimator. Pure.

Why: the delay rule acts when the one-way queue stands above `delay_high_s` (80 ms). A bottleneck with a
short buffer (50 ms) drops packets before any queue reads that high, so only loss cut the rate there
(docs/BENCHMARKS.md, eleventh round). GCC looks at the queue's *trend* instead: packets are grouped into
bursts sent within 5 ms; each group's arrival spacing minus its send spacing is the delay it gained; the
accumulated, smoothed delay's slope over the last 20 groups, scaled, is compared with a threshold that
adapts to the path's own noise (draft-ietf-rmcat-gcc-02 section 5.4-5.5). A queue that grows is seen
whatever the buffer's depth, and a steady queue is not mistaken for a growing one.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class TrendlineDetector:
    group_s: float = 0.005
    window: int = 20
    smoothing: float = 0.9
    gain: float = 4.0
    threshold_ms: float = 12.5
    k_up: float = 0.0087
    k_down: float = 0.039
    overuse_time_s: float = 0.010
    _group: tuple[float, float, float] | None = None  # (first send, last send, last arrival)
    _previous: tuple[float, float] | None = None  # the last complete group's (last send, last arrival)
    _accumulated_ms: float = 0.0
    _smoothed_ms: float = 0.0
    _points: deque[tuple[float, float]] = field(default_factory=deque)  # (arrival ms, smoothed delay ms)
    _first_arrival: float | None = None
    _deltas: int = 0
    _trend: float = 0.0
    _previous_trend: float = 0.0
    _last_update: float | None = None
    _over_since: float | None = None
    _over_count: int = 0
    overusing: bool = False

    def add(self, sent_s: float, arrival_s: float) -> None:
        """One acknowledged packet, in arrival order: our send time, its arrival on the receiver's clock."""
        group = self._group
        if group is None or sent_s - group[0] > self.group_s:
            if group is not None:
                self._complete(group[1], group[2])
            self._group = (sent_s, sent_s, arrival_s)
        else:
            self._group = (group[0], max(group[1], sent_s), max(group[2], arrival_s))

    def _complete(self, sent_s: float, arrival_s: float) -> None:
        previous = self._previous
        self._previous = (sent_s, arrival_s)
        if previous is None:
            return
        delta_ms = ((arrival_s - previous[1]) - (sent_s - previous[0])) * 1000.0
        if self._first_arrival is None:
            self._first_arrival = arrival_s
        self._deltas = min(self._deltas + 1, 60)
        self._accumulated_ms += delta_ms
        self._smoothed_ms = self.smoothing * self._smoothed_ms + (1 - self.smoothing) * self._accumulated_ms
        self._points.append(((arrival_s - self._first_arrival) * 1000.0, self._smoothed_ms))
        if len(self._points) > self.window:
            self._points.popleft()
        if len(self._points) == self.window:
            self._trend = _slope(self._points)
        self._detect(arrival_s)

    def _detect(self, now: float) -> None:
        modified = min(self._deltas, 60) * self._trend * self.gain
        if modified > self.threshold_ms:
            if self._over_since is None:
                self._over_since = now
            self._over_count += 1
            if (
                now - self._over_since > self.overuse_time_s
                and self._over_count > 1
                and self._trend >= self._previous_trend
            ):
                self.overusing = True
        else:
            self._over_since = None
            self._over_count = 0
            self.overusing = False
        self._previous_trend = self._trend
        self._adapt(abs(modified), now)

    def _adapt(self, modified: float, now: float) -> None:
        last = self._last_update
        self._last_update = now
        if last is None or modified > self.threshold_ms + 15.0:
            return  # a spike: the threshold does not chase it
        k = self.k_down if modified < self.threshold_ms else self.k_up
        dt_ms = min((now - last) * 1000.0, 100.0)
        self.threshold_ms = min(
            max(self.threshold_ms + k * (modified - self.threshold_ms) * dt_ms, 6.0), 600.0
        )


def _slope(points: deque[tuple[float, float]]) -> float:
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    num = sum((x - mean_x) * (y - mean_y) for x, y in points)
    den = sum((x - mean_x) ** 2 for x, _ in points)
    return num / den if den > 0 else 0.0
