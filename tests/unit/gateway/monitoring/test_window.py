"""Rolling statistics: percentiles, time windows, bounded memory, cumulative histograms."""

from __future__ import annotations

import math

import pytest

from gateway.monitoring.window import (
    CumulativeHistogram,
    Ewma,
    RateCounter,
    RollingWindow,
    SeriesRing,
    histogram_counts,
    summarize,
)


def test_summarize_percentiles_match_linear_interpolation() -> None:
    s = summarize([float(v) for v in range(1, 101)])
    assert s.count == 100
    assert s.mean == 50.5
    assert s.p50 == pytest.approx(50.5)
    assert s.p95 == pytest.approx(95.05)
    assert s.p99 == pytest.approx(99.01)
    assert s.max == 100.0
    empty = summarize([])
    assert empty.count == 0 and empty.p95 == 0.0


def test_rolling_window_forgets_old_values_and_is_bounded() -> None:
    w = RollingWindow(window_s=10.0, max_samples=100)
    for i in range(20):
        w.add(float(i), float(i))
    # at t=19 the window holds t >= 9
    assert w.values(19.0) == [float(v) for v in range(9, 20)]
    assert w.values(19.0, within_s=2.0) == [17.0, 18.0, 19.0]
    assert w.count(19.0, within_s=2.0) == 3
    assert w.summary(100.0).count == 0  # everything expired
    for i in range(10_000):
        w.add(200.0, float(i))
    assert len(w) == 100  # the count cap holds however fast values come
    assert w.values(200.0)[0] == 9_900.0


def test_rate_counter_measures_events_per_second() -> None:
    r = RateCounter(window_s=5.0)
    assert r.rate(0.0) == 0.0
    t = 100.0
    for i in range(200):  # 20 per second for 10 s
        r.add(t + i * 0.05)
    now = t + 10.0
    assert r.rate(now) == pytest.approx(20.0, rel=0.03)
    assert r.count(now, within_s=1.0) in (20, 21)
    assert r.rate(now + 20.0) == 0.0  # silent for longer than the window
    young = RateCounter(window_s=5.0)
    for i in range(5):
        young.add(0.1 * i)
    assert young.rate(0.4) == 4.0  # under 1 s of history: 4 intervals counted over 1 s, not over 5 s
    assert young.rate(2.0) == 2.0  # 4 intervals over 2 s of age


def test_cumulative_histogram_has_prometheus_semantics() -> None:
    h = CumulativeHistogram(bounds=(10.0, 50.0, 100.0))
    for v in (1.0, 10.0, 10.5, 60.0, 500.0):
        h.observe(v)
    cum = h.cumulative()
    assert cum == [(10.0, 2), (50.0, 3), (100.0, 4), (math.inf, 5)]  # le: a value on a bound counts there
    assert h.count == 5 and h.total == pytest.approx(581.5)
    buckets = h.as_dict()["buckets"]
    assert isinstance(buckets, list) and buckets[-1] == ["+Inf", 5]


def test_histogram_counts_and_series_ring_and_ewma() -> None:
    assert histogram_counts([1.0, 5.0, 20.0, 1000.0], [5.0, 10.0, 50.0]) == [2, 0, 1, 1]
    ring = SeriesRing(max_points=3)
    for i in range(10):
        ring.append({"t": float(i)})
    assert [p["t"] for p in ring.points()] == [7.0, 8.0, 9.0]
    e = Ewma(alpha=0.5)
    assert e.update(10.0) == 10.0
    assert e.update(20.0) == 15.0
    with pytest.raises(ValueError):
        Ewma(alpha=0.0)


def test_rate_counter_only_counted_holds_one_window_over_hours() -> None:
    """A session's drop counter is counted (never asked for a rate): six hours of a drop every 2 s keep one
    window of times, not every drop up to the count cap."""
    c = RateCounter(window_s=5.0)
    for i in range(6 * 3600 // 2):
        c.add(i * 2.0)
        assert c.count(i * 2.0) <= 3
    assert len(c) <= 3
