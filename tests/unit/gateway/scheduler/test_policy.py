"""The pure batching policy, driven by explicit timestamps: what it batches, when, and what it drops."""

from __future__ import annotations

import numpy as np
import pytest

from engines.frames import FrameItem, FrameOutput
from gateway.monitoring.records import Outcome
from gateway.scheduler.estimator import BatchTimeEstimator
from gateway.scheduler.policy import BatchPolicy, Plan, Resolution, SchedulerConfig

FAR = 1e9  # a deadline that never matters


def _item(tag: int = 0) -> FrameItem:
    return FrameItem(image=np.full((2, 2, 3), tag, dtype=np.uint8), source=None)


def _outputs(plan: Plan) -> list[FrameOutput]:
    return [FrameOutput(image=p.item.image, faces=0) for p in plan.items]


def _policy(
    max_batch: int = 4,
    delay_ms: float = 4.0,
    workers: int = 1,
    budget_ms: float = 1e9,
    estimator: BatchTimeEstimator | None = None,
    batch_wait: str = "window",
    interval_batches: float = 0.0,
) -> BatchPolicy:
    """The fixed-window rule by default: these tests pin the window's mechanics; the cost rule has its own
    tests in test_scheduler_partners.py. The frame-interval deadline is off unless asked for (its own tests
    below): these tests submit frames milliseconds apart, which would make that interval milliseconds."""
    return BatchPolicy(
        SchedulerConfig(
            max_batch=max_batch,
            max_queue_delay_ms=delay_ms,
            workers=workers,
            budget_ms=budget_ms,
            batch_wait=batch_wait,
            interval_deadline_batches=interval_batches,
        ),
        estimator,
    )


def _submit(pol: BatchPolicy, sid: str, fid: int, now: float, deadline: float = FAR) -> int:
    ticket, resolved = pol.submit(sid, fid, _item(fid), arrival_s=now, deadline_s=deadline, now=now)
    assert resolved == []
    return ticket


def _sessions(plan: Plan | None) -> list[str]:
    assert plan is not None
    return [p.session_id for p in plan.items]


def _outcomes(res: list[Resolution] | tuple[Resolution, ...]) -> dict[int, Outcome]:
    return {t: f.outcome for t, f in res}


def test_lone_session_is_dispatched_at_once() -> None:
    pol = _policy()
    _submit(pol, "a", 1, now=0.0)
    d = pol.schedule(0.0)
    assert _sessions(d.plan) == ["a"]
    assert d.plan is not None and d.plan.dispatched_s == 0.0


def test_waits_for_other_active_sessions_then_flushes_on_delay() -> None:
    pol = _policy(max_batch=4, delay_ms=4.0)
    # Make a and b known as active sessions.
    for sid in ("a", "b"):
        _submit(pol, sid, 1, now=0.0)
    first = pol.schedule(0.0).plan
    assert first is not None and len(first.items) == 2  # both known sessions pending: no reason to wait
    pol.complete(first, _outputs(first), now=0.001)

    _submit(pol, "a", 2, now=0.010)
    d = pol.schedule(0.010)
    assert d.plan is None  # b is active and may still contribute
    assert d.wake_at == pytest.approx(0.014)
    assert pol.schedule(0.0139).plan is None
    late = pol.schedule(0.014)
    assert _sessions(late.plan) == ["a"]


def test_flushes_when_all_active_sessions_are_pending() -> None:
    pol = _policy(max_batch=8)
    for sid in ("a", "b", "c"):
        _submit(pol, sid, 1, now=0.0)
    plan = pol.schedule(0.0).plan
    assert plan is not None
    pol.complete(plan, _outputs(plan), now=0.002)
    _submit(pol, "b", 2, now=0.010)
    _submit(pol, "a", 2, now=0.011)
    assert pol.schedule(0.011).plan is None  # c may still come
    _submit(pol, "c", 2, now=0.012)
    assert _sessions(pol.schedule(0.012).plan) == ["b", "a", "c"]  # oldest first


def test_flushes_on_max_batch_and_keeps_the_rest_pending() -> None:
    pol = _policy(max_batch=2, workers=2)
    for i, sid in enumerate(("a", "b", "c", "d", "e")):
        _submit(pol, sid, 1, now=i * 0.0001)
    d1 = pol.schedule(0.0005)
    assert _sessions(d1.plan) == ["a", "b"]
    d2 = pol.schedule(0.0005)
    assert _sessions(d2.plan) == ["c", "d"]
    d3 = pol.schedule(0.0005)  # both workers busy
    assert d3.plan is None
    assert pol.queued == 1 and pol.in_flight == 2


def test_idle_inactive_session_stops_holding_batches_back() -> None:
    pol = BatchPolicy(SchedulerConfig(max_batch=4, max_queue_delay_ms=50.0), active_horizon_s=1.0)
    _submit(pol, "a", 1, now=0.0)
    _submit(pol, "b", 1, now=0.0)
    plan = pol.schedule(0.0).plan
    assert plan is not None
    pol.complete(plan, _outputs(plan), now=0.001)
    _submit(pol, "a", 2, now=2.0)  # b has been silent for 2 s: not waited for
    assert _sessions(pol.schedule(2.0).plan) == ["a"]


def test_newer_frame_replaces_pending_one_as_stale() -> None:
    pol = _policy()
    _submit(pol, "x", 0, now=0.0)
    _submit(pol, "a", 1, now=0.0)
    plan = pol.schedule(0.0).plan  # batch [x, a]
    assert plan is not None
    t2 = _submit(pol, "a", 2, now=0.001)  # a is in flight: frame 2 waits, and may be replaced
    t3, resolved = pol.submit("a", 3, _item(3), arrival_s=0.002, deadline_s=FAR, now=0.002)
    assert _outcomes(resolved) == {t2: Outcome.DROPPED_STALE}
    assert resolved[0][1].queue_wait_ms == pytest.approx(1.0)
    assert resolved[0][1].output is None and resolved[0][1].batch_size == 0
    assert pol.queued == 1
    pol.complete(plan, _outputs(plan), now=0.003)
    nxt = pol.schedule(0.010).plan  # x is active: a's frame waits the queue delay for it
    assert nxt is not None and [p.ticket for p in nxt.items] == [t3]
    assert pol.stats()["dropped_stale"] == 1.0


def test_session_in_flight_is_not_dispatched_again_so_order_holds() -> None:
    pol = _policy(max_batch=4, workers=2)
    _submit(pol, "a", 1, now=0.0)
    first = pol.schedule(0.0).plan
    assert _sessions(first) == ["a"]
    _submit(pol, "a", 2, now=0.001)
    assert pol.schedule(0.010).plan is None  # a worker is free, but a's frame 1 is still in flight
    assert first is not None
    pol.complete(first, _outputs(first), now=0.011)
    second = pol.schedule(0.011).plan
    assert second is not None and [p.frame_id for p in second.items] == [2]


def test_fairness_busy_session_cannot_starve_others() -> None:
    """A session submitting far more often than others still takes one slot per batch, oldest first."""
    pol = _policy(max_batch=2, delay_ms=1.0)
    _submit(pol, "quiet1", 1, now=0.000)
    _submit(pol, "quiet2", 1, now=0.001)
    for k in range(20):  # busy session floods; each new frame replaces its previous one
        pol.submit("busy", k, _item(k), arrival_s=0.002 + k * 1e-5, deadline_s=FAR, now=0.002 + k * 1e-5)
    first = pol.schedule(0.003).plan
    assert _sessions(first) == ["quiet1", "quiet2"]
    assert first is not None
    pol.complete(first, _outputs(first), now=0.004)
    second = pol.schedule(0.004).plan
    assert second is not None and [(p.session_id, p.frame_id) for p in second.items] == [("busy", 19)]
    assert pol.stats()["dropped_stale"] == 19.0


def test_batch_never_holds_two_frames_of_a_session() -> None:
    pol = _policy(max_batch=8)
    for k in range(5):
        pol.submit("a", k, _item(k), arrival_s=0.0, deadline_s=FAR, now=0.0)
    _submit(pol, "b", 0, now=0.0)
    plan = pol.schedule(0.0).plan
    assert plan is not None
    assert sorted(_sessions(plan)) == ["a", "b"]


def test_deadline_rejection_uses_estimates() -> None:
    est = BatchTimeEstimator()
    est.observe(1, 10.0)  # one frame takes 10 ms
    pol = _policy(estimator=est)
    t_late = _submit(pol, "late", 1, now=0.0, deadline=0.005)  # cannot finish even alone
    t_ok = _submit(pol, "ok", 1, now=0.0, deadline=0.050)
    d = pol.schedule(0.0)
    assert _outcomes(d.resolved) == {t_late: Outcome.DROPPED_DEADLINE}
    assert d.plan is None  # "late" is still an active session: its next frame may join
    plan = pol.schedule(0.004).plan
    assert plan is not None and [p.ticket for p in plan.items] == [t_ok]
    assert pol.stats()["dropped_deadline"] == 1.0


def test_batch_shrinks_instead_of_making_an_item_late() -> None:
    est = BatchTimeEstimator()
    est.observe(1, 10.0)
    est.observe(2, 14.0)
    est.observe(3, 18.0)
    pol = BatchPolicy(SchedulerConfig(max_batch=3, budget_ms=1e9), est)
    _submit(pol, "a", 1, now=0.0, deadline=0.015)  # fits a batch of 2 (14 ms), not of 3 (18 ms)
    _submit(pol, "b", 1, now=0.0)
    _submit(pol, "c", 1, now=0.0)
    d = pol.schedule(0.0)
    assert d.resolved == ()
    assert _sessions(d.plan) == ["a", "b"]
    assert d.plan is not None and d.plan.predicted_ms == pytest.approx(14.0)
    assert pol.queued == 1  # c waits for the next batch, not dropped


def test_pending_frame_expires_while_workers_are_busy() -> None:
    est = BatchTimeEstimator()
    est.observe(1, 10.0)
    pol = BatchPolicy(SchedulerConfig(max_batch=4, budget_ms=1e9), est)
    _submit(pol, "a", 1, now=0.0)
    busy = pol.schedule(0.0).plan
    assert busy is not None
    t = _submit(pol, "b", 1, now=0.001, deadline=0.030)
    d = pol.schedule(0.001)
    assert d.plan is None and d.wake_at == pytest.approx(0.020, abs=1e-5)  # just past the last start time
    assert pol.schedule(0.020).resolved == ()  # finishing exactly at the deadline is still in time
    assert d.wake_at is not None
    d2 = pol.schedule(d.wake_at)
    assert _outcomes(d2.resolved) == {t: Outcome.DROPPED_DEADLINE}


def test_budget_caps_the_callers_deadline() -> None:
    est = BatchTimeEstimator()
    est.observe(1, 10.0)
    pol = BatchPolicy(SchedulerConfig(budget_ms=50.0), est)
    ticket, _ = pol.submit("a", 1, _item(), arrival_s=0.0, deadline_s=10.0, now=0.045)
    d = pol.schedule(0.045)  # 45 ms after arrival + 10 ms of work > 50 ms budget
    assert _outcomes(d.resolved) == {ticket: Outcome.DROPPED_DEADLINE}


def test_urgent_item_flushes_before_the_queue_delay() -> None:
    est = BatchTimeEstimator()
    est.observe(1, 10.0)
    pol = BatchPolicy(
        SchedulerConfig(max_batch=4, max_queue_delay_ms=20.0, budget_ms=1e9, batch_wait="window"), est
    )
    _submit(pol, "a", 1, now=0.0)
    _submit(pol, "b", 1, now=0.0)
    plan = pol.schedule(0.0).plan
    assert plan is not None
    pol.complete(plan, _outputs(plan), now=0.010)
    _submit(pol, "a", 2, now=0.100, deadline=0.115)  # b active: would wait 20 ms, but must start by 0.105
    d = pol.schedule(0.100)
    assert d.plan is None and d.wake_at == pytest.approx(0.105)
    assert _sessions(pol.schedule(0.105).plan) == ["a"]


def test_complete_maps_outputs_and_learns_time() -> None:
    pol = _policy()
    ta = _submit(pol, "a", 1, now=0.0)
    tb = _submit(pol, "b", 1, now=0.001)
    plan = pol.schedule(0.002).plan
    assert plan is not None
    outs = _outputs(plan)
    res = dict(pol.complete(plan, outs, now=0.012))
    assert res[ta].outcome is Outcome.PROCESSED and res[ta].output is outs[0]
    assert res[tb].output is outs[1]
    assert res[ta].queue_wait_ms == pytest.approx(2.0)
    assert res[tb].queue_wait_ms == pytest.approx(1.0)
    assert res[ta].batch_size == 2 and res[ta].process_ms == pytest.approx(10.0)
    assert pol.estimator.predict_ms(2) == pytest.approx(10.0)
    stats = pol.stats()
    assert stats["batches_run"] == 1.0 and stats["mean_batch_size"] == 2.0 and stats["processed"] == 2.0
    with pytest.raises(ValueError):
        pol.complete(plan, outs, now=0.013)  # not in flight any more


def test_error_fails_every_item_of_the_batch() -> None:
    pol = _policy()
    tickets = [_submit(pol, s, 1, now=0.0) for s in ("a", "b", "c")]
    plan = pol.schedule(0.0).plan
    assert plan is not None
    res = pol.complete(plan, RuntimeError("engine fell over"), now=0.005)
    assert _outcomes(res) == {t: Outcome.ERROR for t in tickets}
    assert all(f.output is None and f.error and "engine fell over" in f.error for _, f in res)
    assert not pol.estimator.measured  # a failed batch's time says nothing about batch cost
    assert pol.stats()["errors"] == 3.0
    # The sessions are free again.
    _submit(pol, "a", 2, now=0.006)
    assert _sessions(pol.schedule(0.010).plan) == ["a"]


def test_output_count_mismatch_fails_every_item() -> None:
    pol = _policy()
    tickets = [_submit(pol, s, 1, now=0.0) for s in ("a", "b")]
    plan = pol.schedule(0.0).plan
    assert plan is not None
    res = pol.complete(plan, _outputs(plan)[:1], now=0.005)
    assert _outcomes(res) == {t: Outcome.ERROR for t in tickets}
    assert all(f.error and "1 outputs for 2 items" in f.error for _, f in res)


def test_remove_session_and_drain() -> None:
    pol = _policy()
    _submit(pol, "a", 1, now=0.0)
    _submit(pol, "b", 1, now=0.0)
    plan = pol.schedule(0.0).plan  # a, b in flight
    assert plan is not None
    tb = _submit(pol, "b", 2, now=0.001)
    tc = _submit(pol, "c", 1, now=0.001)
    assert _outcomes(pol.remove_session("b", now=0.002)) == {tb: Outcome.DROPPED_STALE}
    assert pol.remove_session("b", now=0.002) == []
    assert _outcomes(pol.drain(now=0.003)) == {tc: Outcome.DROPPED_STALE}
    assert pol.queued == 0
    # The batch in flight still completes normally.
    assert {f.outcome for _, f in pol.complete(plan, _outputs(plan), now=0.004)} == {Outcome.PROCESSED}


def test_set_max_batch_is_clamped() -> None:
    pol = _policy(max_batch=4, workers=1)
    pol.set_max_batch(2)
    for sid in "abcd":
        _submit(pol, sid, 1, now=0.0)
    assert len(_sessions(pol.schedule(0.0).plan)) == 2
    pol.set_max_batch(100)
    assert pol.max_batch == 4
    pol.set_max_batch(0)
    assert pol.max_batch == 1


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        SchedulerConfig(max_batch=0)
    with pytest.raises(ValueError):
        SchedulerConfig(workers=0)
    with pytest.raises(ValueError):
        SchedulerConfig(budget_ms=0)


def _periodic_run(probe_after_ms: float, seconds: float = 5.0) -> tuple[list[int], BatchPolicy]:
    """One 15 fps session whose frames have 60 ms to finish, after a cold first batch of 200 ms; the real
    batch time is 20 ms. Returns the frame ids processed, in order."""
    pol = BatchPolicy(SchedulerConfig(max_batch=4, budget_ms=60.0, probe_after_ms=probe_after_ms))
    _submit(pol, "a", 0, now=0.0)
    cold = pol.schedule(0.0).plan
    assert cold is not None
    pol.complete(cold, _outputs(cold), 0.200)  # the estimate is now 200 ms: every frame "cannot make it"
    done: list[int] = []
    for k in range(1, int(seconds * 15)):
        t = 0.2 + k / 15.0
        pol.submit("a", k, _item(k % 255), arrival_s=t, deadline_s=t + 0.060, now=t)
        d = pol.schedule(t)
        if d.plan is not None:
            pol.complete(d.plan, _outputs(d.plan), t + 0.020)
            done.extend(p.frame_id for p in d.plan.items)
    return done, pol


def test_a_wrong_estimate_is_corrected_by_probes_not_kept_forever() -> None:
    stuck, _ = _periodic_run(probe_after_ms=1e9)
    assert stuck == []  # without probes the 200 ms estimate rejects every frame, for good
    done, pol = _periodic_run(probe_after_ms=250.0)
    probes = int(pol.stats()["deadline_probes"])
    assert 1 <= probes <= 5 * 4  # at most one per 250 ms
    assert pol.estimator.predict_ms(1) < 40.0  # measured back down towards the real 20 ms
    last = list(range(75 - 15, 75))
    assert done[-15:] == last  # the last second: every frame processed, in time, no probe needed
    assert probes < len(done)


def test_no_probe_while_a_worker_is_busy() -> None:
    est = BatchTimeEstimator()
    est.observe(1, 500.0)
    pol = BatchPolicy(SchedulerConfig(max_batch=4, budget_ms=1e9, probe_after_ms=10.0), est)
    _submit(pol, "a", 1, now=0.0, deadline=1.0)
    busy = pol.schedule(0.0).plan
    assert busy is not None
    t = _submit(pol, "b", 1, now=1.0, deadline=1.1)  # late, the estimate unconfirmed for 1 s: but busy
    assert _outcomes(pol.schedule(1.0).resolved) == {t: Outcome.DROPPED_DEADLINE}
    assert pol.stats()["deadline_probes"] == 0.0


def _interval_setup(single_ms: float, interval_batches: float) -> tuple[BatchPolicy, float]:
    """One worker kept busy by session "busy"; session "a" has sent three frames at 15 fps (its interval is
    known). Returns the policy and the arrival time of a's next frame, which must wait for the worker."""
    est = BatchTimeEstimator()
    est.observe(1, single_ms)
    pol = BatchPolicy(
        SchedulerConfig(
            max_batch=1,
            budget_ms=1e9,
            workers=1,
            probe_after_ms=1e9,
            interval_deadline_batches=interval_batches,
        ),
        est,
    )
    period = 1.0 / 15.0
    for k in range(3):
        _submit(pol, "a", k, now=k * period)
        plan = pol.schedule(k * period).plan
        assert plan is not None
        pol.complete(plan, _outputs(plan), now=k * period + single_ms / 1000.0)
    _submit(pol, "busy", 0, now=3 * period)
    assert pol.schedule(3 * period).plan is not None  # the only worker is now busy, and stays so
    return pol, 3 * period


def test_a_frame_that_cannot_finish_before_its_successor_is_due_is_dropped() -> None:
    pol, t0 = _interval_setup(single_ms=10.0, interval_batches=3.0)
    ticket = _submit(pol, "a", 3, now=t0)
    # waited 50 ms: 50 + 10 < one interval (66.7 ms): still worth running
    assert pol.schedule(t0 + 0.050).resolved == ()
    # waited 60 ms: it would finish at 70 ms, after its successor is due
    assert _outcomes(pol.schedule(t0 + 0.060).resolved) == {ticket: Outcome.DROPPED_DEADLINE}


def test_off_the_budget_alone_decides() -> None:
    pol, t0 = _interval_setup(single_ms=10.0, interval_batches=0.0)
    _submit(pol, "a", 3, now=t0)
    assert pol.schedule(t0 + 0.500).resolved == ()  # half a second late, budget 1e9: kept


def test_a_frame_that_costs_more_than_the_interval_gets_several_single_frame_times() -> None:
    """40 ms frames at 15 fps: three single-frame times (120 ms) is longer than the interval, so a frame
    may wait 70 ms and still run (70 + 40 < 120), where the interval alone would have dropped it."""
    pol, t0 = _interval_setup(single_ms=40.0, interval_batches=3.0)
    ticket = _submit(pol, "a", 3, now=t0)
    assert pol.schedule(t0 + 0.070).resolved == ()
    assert _outcomes(pol.schedule(t0 + 0.085).resolved) == {ticket: Outcome.DROPPED_DEADLINE}


def test_no_interval_cap_before_the_interval_is_known() -> None:
    est = BatchTimeEstimator()
    est.observe(1, 10.0)
    pol = BatchPolicy(SchedulerConfig(max_batch=1, budget_ms=1e9, workers=1), est)
    _submit(pol, "busy", 0, now=0.0)
    assert pol.schedule(0.0).plan is not None
    _submit(pol, "new", 0, now=0.0)  # a session's first frame: no interval yet
    assert pol.schedule(0.300).resolved == ()
