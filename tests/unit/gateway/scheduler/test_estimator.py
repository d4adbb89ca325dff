"""Batch-time estimates: EWMA per size, linear fill for unmeasured sizes, pessimistic extrapolation."""

from __future__ import annotations

import pytest

from gateway.scheduler.estimator import BatchTimeEstimator, EstimatorConfig


def test_prior_before_any_measurement() -> None:
    assert BatchTimeEstimator().predict_ms(4) == 0.0
    assert BatchTimeEstimator(EstimatorConfig(prior_ms=12.5)).predict_ms(1) == 12.5
    assert not BatchTimeEstimator().measured


def test_ewma_per_size() -> None:
    est = BatchTimeEstimator(EstimatorConfig(alpha=0.5))
    est.observe(2, 10.0)
    assert est.predict_ms(2) == pytest.approx(10.0)
    est.observe(2, 20.0)
    assert est.predict_ms(2) == pytest.approx(15.0)
    est.observe(2, 20.0)
    assert est.predict_ms(2) == pytest.approx(17.5)
    assert est.measurements(2) == 3
    assert est.measurements(3) == 0


def test_single_size_extrapolates_pessimistically() -> None:
    est = BatchTimeEstimator()
    est.observe(2, 10.0)
    assert est.predict_ms(4) == pytest.approx(20.0)  # no batching gain assumed above the measured size
    assert est.predict_ms(1) == pytest.approx(10.0)  # and no saving below it
    assert est.fit() is None


def test_linear_fit_fills_unmeasured_sizes() -> None:
    est = BatchTimeEstimator()
    for b in (1, 2, 4):
        est.observe(b, 3.0 + 2.0 * b)  # a = 3 ms fixed, c = 2 ms per item
    line = est.fit()
    assert line is not None
    a, c = line
    assert a == pytest.approx(3.0)
    assert c == pytest.approx(2.0)
    assert est.predict_ms(8) == pytest.approx(19.0)
    assert est.predict_ms(3) == pytest.approx(9.0)
    snap = est.snapshot()
    assert snap["est_batch4_ms"] == pytest.approx(11.0)
    assert snap["est_per_item_ms"] == pytest.approx(2.0)


def test_measured_size_trusts_its_own_average() -> None:
    est = BatchTimeEstimator()
    est.observe(1, 5.0)
    est.observe(2, 7.0)
    est.observe(4, 30.0)  # off the line through 1 and 2
    assert est.predict_ms(4) == pytest.approx(30.0)


def test_fit_never_has_negative_slope_or_intercept() -> None:
    est = BatchTimeEstimator()
    est.observe(1, 10.0)
    est.observe(8, 4.0)  # noise: bigger batch measured faster
    a, c = est.fit() or (None, None)
    assert a is not None and c is not None
    assert c >= 0.0 and a >= 0.0
    # Never cheaper than a measured smaller batch.
    assert est.predict_ms(4) >= 10.0

    est2 = BatchTimeEstimator()
    est2.observe(2, 1.0)
    est2.observe(4, 9.0)  # line would cross zero at b ~ 1.75: refit through the origin instead
    a2, c2 = est2.fit() or (None, None)
    assert a2 == 0.0 and c2 is not None and c2 > 0.0
    assert est2.predict_ms(1) >= 0.0


def test_invalid_inputs() -> None:
    with pytest.raises(ValueError):
        EstimatorConfig(alpha=0.0)
    with pytest.raises(ValueError):
        BatchTimeEstimator().observe(0, 1.0)
    with pytest.raises(ValueError):
        BatchTimeEstimator().predict_ms(0)
    est = BatchTimeEstimator()
    est.observe(1, -3.0)  # a clock hiccup must not produce a negative estimate
    assert est.predict_ms(1) == 0.0
