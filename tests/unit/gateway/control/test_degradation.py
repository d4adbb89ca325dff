"""The degradation controller and the capacity/batch advice: pure policy on synthetic stats."""

from __future__ import annotations

from gateway.control.degradation import (
    ControllerInput,
    DegradationConfig,
    DegradationController,
    admits_new_sessions,
    options_for_level,
    recommend_max_batch,
)

BUDGET = 150.0


def _run(
    ctl: DegradationController,
    t0: float,
    t1: float,
    p95: float | None,
    vram: float | None = None,
    step: float = 0.5,
    drops: float | None = None,
) -> list[tuple[float, int]]:
    """Feed constant stats from t0 to t1 (inclusive) and return (time, level) at every level change."""
    changes = []
    t = t0
    while t <= t1 + 1e-9:
        d = ctl.update(
            ControllerInput(
                now=t, server_p95_ms=p95, vram_fraction=vram, budget_ms=BUDGET, drop_fraction=drops
            )
        )
        if d.changed:
            changes.append((t, d.level))
            assert d.reason
        t += step
    return changes


def test_steps_down_one_level_per_sustained_overload_and_stops_at_max() -> None:
    ctl = DegradationController(DegradationConfig())
    assert _run(ctl, 0.0, 2.5, p95=200.0) == []  # over budget, but not yet for 3 s
    assert ctl.level == 0
    changes = _run(ctl, 3.0, 30.0, p95=200.0)
    assert changes == [(3.0, 1), (6.0, 2), (9.0, 3), (12.0, 4)]  # each further step needs its own 3 s
    assert ctl.level == 4 and not admits_new_sessions(ctl.level)


def test_brief_spike_does_not_step_down() -> None:
    ctl = DegradationController(DegradationConfig())
    _run(ctl, 0.0, 2.0, p95=400.0)
    _run(ctl, 2.5, 3.0, p95=100.0)  # back under budget resets the timer
    assert _run(ctl, 3.5, 5.5, p95=400.0) == []
    assert ctl.level == 0


def test_steps_up_with_hysteresis() -> None:
    ctl = DegradationController(DegradationConfig())
    _run(ctl, 0.0, 6.0, p95=200.0)
    assert ctl.level == 2
    # between 60% and 80% of budget: hold, however long
    assert _run(ctl, 6.5, 40.0, p95=120.0) == []
    # headroom (< 90 ms) must last 10 s per step up
    changes = _run(ctl, 40.5, 70.0, p95=50.0)
    assert changes == [(50.5, 1), (60.5, 0)]
    assert ctl.level == 0


def test_vram_pressure_steps_down_even_with_fast_frames() -> None:
    ctl = DegradationController(DegradationConfig())
    changes = _run(ctl, 0.0, 3.0, p95=20.0, vram=0.95)
    assert changes == [(3.0, 1)]
    assert _run(ctl, 3.5, 12.5, p95=20.0, vram=0.5) == []
    assert _run(ctl, 13.0, 14.0, p95=20.0, vram=0.5) == [(13.5, 0)]


def test_no_frames_is_no_latency_evidence_and_idle_recovers() -> None:
    ctl = DegradationController(DegradationConfig())
    _run(ctl, 0.0, 3.0, p95=300.0)
    assert ctl.level == 1
    assert _run(ctl, 3.5, 14.0, p95=None) == [(13.5, 0)]


def test_disabled_controller_stays_at_full_quality() -> None:
    ctl = DegradationController(DegradationConfig(enabled=False))
    assert _run(ctl, 0.0, 60.0, p95=1000.0, vram=0.99) == []
    assert ctl.level == 0


def test_options_for_each_level() -> None:
    cfg = DegradationConfig(reduced_detect_size=192)
    req = ("face_swapper", "face_enhancer")
    o0 = options_for_level(0, req, cfg)
    assert o0.processors == req and o0.detect_every == 1 and o0.detect_size is None
    o1 = options_for_level(1, req, cfg)
    assert o1.processors == ("face_swapper",) and o1.detect_every == 1
    o2 = options_for_level(2, req, cfg)
    assert o2.detect_every == 2 and o2.detect_size is None
    o3 = options_for_level(3, req, cfg)
    assert o3.detect_every == 2 and o3.detect_size == 192
    assert options_for_level(4, req, cfg) == o3
    assert admits_new_sessions(3) and not admits_new_sessions(4)


def test_recommend_max_batch_from_fixed_plus_per_item_cost() -> None:
    pts = [(b, 5.0 + 2.0 * b) for b in (1, 2, 4, 8) for _ in range(3)]
    assert recommend_max_batch(pts, budget_ms=50.0) == 10  # (25 - 5) / 2
    assert recommend_max_batch(pts, budget_ms=150.0) == 32  # capped
    assert recommend_max_batch(pts, budget_ms=5.0) == 1  # never below 1
    same = [(4, 40.0)] * 5  # one batch size: 10 ms per item
    assert recommend_max_batch(same, budget_ms=150.0) == 7
    assert recommend_max_batch([(1, 3.0)], budget_ms=150.0, default=8) == 8


def _run_drops(
    ctl: DegradationController, t0: float, t1: float, drops: float, p95: float = 100.0
) -> list[int]:
    return [level for _, level in _run(ctl, t0, t1, p95=p95, drops=drops)]


def test_shedding_frames_steps_down_even_when_processed_frames_meet_the_budget() -> None:
    """Deadlines keep the processed frames under budget (p95 100 ms here), so overload shows as drops."""
    ctl = DegradationController(DegradationConfig())
    assert _run_drops(ctl, 0.0, 2.5, drops=0.3) == []  # not yet sustained
    assert _run_drops(ctl, 3.0, 3.0, drops=0.3) == [1]
    decision = ctl.update(
        ControllerInput(now=6.0, server_p95_ms=100.0, vram_fraction=None, budget_ms=BUDGET, drop_fraction=0.3)
    )
    assert decision.level == 2 and "30% of frames dropped" in decision.reason
    # a few drops (between 2% and 10%) with latency in between: hold
    assert _run_drops(ctl, 6.5, 40.0, drops=0.05, p95=80.0) == []
    # latency headroom but still 5% shed: no step up either (drops must fall below 2%)
    assert _run_drops(ctl, 40.5, 60.0, drops=0.05, p95=50.0) == []
    assert _run_drops(ctl, 60.5, 71.0, drops=0.0, p95=50.0) == [1]
