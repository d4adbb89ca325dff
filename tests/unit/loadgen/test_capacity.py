"""Capacity search policy on simulated latency curves (no network, no gateway)."""

from __future__ import annotations

import random

import pytest

from loadgen.capacity import CapacityConfig, CapacitySearch, PointMeasurement, PointResult, WindowMeasure


def _curve(n: int) -> tuple[float, float]:
    """p95 grows with load; past saturation the gateway returns fewer frames. True capacity: 13 jobs."""
    p95 = 40.0 + 8.0 * n
    ratio = 1.0 if n <= 16 else 16 / n
    return p95, ratio


def _run(config: CapacityConfig, curve=_curve, noise: float = 0.0, seed: int = 0) -> CapacitySearch:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    search = CapacitySearch(config)
    guard = 0
    while (n := search.next_jobs()) is not None:
        guard += 1
        assert guard < 50, "search does not converge"
        point = PointMeasurement(n, config)
        while not point.done:
            p95, ratio = curve(n)
            point.add(WindowMeasure(p95 * (1 + rng.uniform(-noise, noise)), ratio))
        search.report(point.result())
    return search


def test_step_then_bisect_finds_the_largest_passing_n() -> None:
    search = _run(CapacityConfig(budget_ms=150, start=1, step=4))
    assert search.capacity == 13
    tried = [p.jobs for p in search.points]
    assert tried[:5] == [1, 5, 9, 13, 17]  # stepping until the first failure
    assert set(tried[5:]) <= {14, 15, 16} and 14 in tried  # then bisecting in (13, 17)
    assert search.finished


@pytest.mark.parametrize("step", [1, 2, 3, 5, 8])
def test_converges_for_any_step(step: int) -> None:
    assert _run(CapacityConfig(budget_ms=150, step=step)).capacity == 13


def test_fps_criterion_limits_capacity_when_latency_is_fine() -> None:
    def curve(n: int) -> tuple[float, float]:
        return 50.0, (1.0 if n <= 6 else 0.85)

    assert _run(CapacityConfig(budget_ms=150, step=3), curve).capacity == 6


def test_first_point_failing_gives_zero() -> None:
    search = _run(CapacityConfig(budget_ms=10, step=2))
    assert search.capacity == 0
    assert [p.jobs for p in search.points] == [1]


def test_max_jobs_bounds_the_search() -> None:
    search = _run(CapacityConfig(budget_ms=10_000, step=4, max_jobs=10))
    assert search.capacity == 10
    assert max(p.jobs for p in search.points) == 10


def test_noisy_measurements_still_converge_near_the_true_capacity() -> None:
    search = _run(CapacityConfig(budget_ms=150, step=4, tolerance=0.10), noise=0.04, seed=3)
    assert search.capacity in (12, 13)


def test_stability_needs_consecutive_agreeing_windows() -> None:
    cfg = CapacityConfig(stable_windows=3, tolerance=0.10, max_windows=6)
    point = PointMeasurement(4, cfg)
    for p95 in (200.0, 120.0, 100.0):
        point.add(WindowMeasure(p95, 1.0))
    assert not point.stable and not point.done
    point.add(WindowMeasure(105.0, 1.0))
    point.add(WindowMeasure(98.0, 1.0))
    assert point.stable and point.done
    r = point.result()
    assert r.stable and r.windows == 5 and r.p95_ms == pytest.approx((100 + 105 + 98) / 3)


def test_unstable_point_stops_at_the_window_allowance() -> None:
    cfg = CapacityConfig(stable_windows=3, tolerance=0.05, max_windows=4, budget_ms=1000)
    point = PointMeasurement(2, cfg)
    for p95 in (50.0, 100.0, 50.0, 100.0):
        assert not point.done
        point.add(WindowMeasure(p95, 1.0))
    assert point.done and not point.stable
    result = point.result()
    assert isinstance(result, PointResult) and result.ok and not result.stable


def test_nothing_returned_fails_the_point() -> None:
    point = PointMeasurement(3, CapacityConfig())
    for _ in range(3):
        point.add(WindowMeasure(None, 0.0))
    assert point.done and not point.result().ok


def test_invalid_config_is_rejected() -> None:
    with pytest.raises(ValueError):
        CapacityConfig(start=0)
    with pytest.raises(ValueError):
        CapacityConfig(stable_windows=5, max_windows=3)
