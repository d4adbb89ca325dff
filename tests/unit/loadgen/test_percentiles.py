"""One percentile for every report: linear interpolation, the named statistics in order, rounded."""

from __future__ import annotations

import pytest

from loadgen.percentiles import percentile, percentiles, summary


def test_linear_interpolation_between_samples() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5  # an even count's median: the middle two's mean
    assert percentiles([10.0, 20.0, 30.0, 40.0, 50.0], (0, 25, 95, 100)) == [10.0, 20.0, 48.0, 50.0]


def test_summary_keeps_the_callers_names_order_and_rounding() -> None:
    got = summary([1.0, 2.0, 4.0], {"mean": "mean", "p50_ms": 50, "p90_ms": 90, "max_ms": "max"}, 2)
    assert list(got) == ["mean", "p50_ms", "p90_ms", "max_ms"]
    assert got == {"mean": 2.33, "p50_ms": 2.0, "p90_ms": 3.6, "max_ms": 4.0}


def test_no_samples_is_an_error_not_a_number() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        summary([], {"mean": "mean"}, 1)
