"""The fixed-size latency histogram: percentiles within its bucket width, merging, memory independent of
the number of values."""

from __future__ import annotations

import numpy as np
import pytest

from loadgen.streaming import LogHistogram


def test_percentiles_within_one_percent_of_exact() -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.lognormal(3.0, 0.5, 20_000), rng.uniform(100, 900, 500)])
    h = LogHistogram()
    h.extend(values.tolist())
    for q in (1, 50, 90, 95, 99, 100):
        exact = float(np.percentile(values, q, method="inverted_cdf"))
        assert h.percentile(q) == pytest.approx(exact, rel=0.01)
    assert h.count == values.size and h.mean == pytest.approx(float(values.mean()))
    assert h.max == pytest.approx(float(values.max())) and h.min == pytest.approx(float(values.min()))


def test_out_of_range_values_are_counted_and_clamped_to_what_was_seen() -> None:
    h = LogHistogram(low=1.0, high=100.0)
    h.extend([0.001, 0.5, 50.0, 5e9])
    assert h.count == 4
    assert h.percentile(0) == pytest.approx(0.001)
    assert h.percentile(100) == pytest.approx(5e9)
    assert LogHistogram().percentile(95) is None


def test_merge_equals_one_histogram_of_everything() -> None:
    a, b, both = LogHistogram(), LogHistogram(), LogHistogram()
    for v in range(1, 1000):
        (a if v % 3 else b).add(float(v))
        both.add(float(v))
    a.merge(b)
    assert a.count == both.count and a.percentiles((50, 95)) == both.percentiles((50, 95))
    with pytest.raises(ValueError):
        a.merge(LogHistogram(relative_width=0.05))


def test_memory_is_fixed_whatever_the_number_of_values() -> None:
    """Six hours of 3 streams at 15 fps: the histogram holds as many counters after as before."""
    h = LogHistogram()
    buckets = len(h._counts)  # noqa: SLF001
    rng = np.random.default_rng(1)
    h.extend(rng.lognormal(3.0, 1.0, 6 * 3600 * 45).tolist())
    assert len(h._counts) == buckets  # noqa: SLF001
    assert h.count == 6 * 3600 * 45
