"""The batching decisions, with no clock, no threads and no asyncio: time comes in as `now`.

Live video never queues (one pending frame per session; a newer one replaces it, DROPPED_STALE). Frames
leave a session in order (no second frame in flight). Eligible frames go oldest first, so no session starves.
A batch leaves while a worker is free: when full, when its oldest frame has waited `max_queue_delay_ms`, when
no partner is worth waiting for (`partners`), or before a wait would miss a deadline; each reason is counted.
A frame that cannot finish even alone before its deadline (the budget, or the session's next frame) is not
processed; a batch too big to finish in time is shrunk. When predictions reject everything and no worker is
busy, one frame runs anyway as a probe to correct the estimate. A failed batch, or one whose output count
differs, fails every item (ERROR). Methods return what they resolved; the runner owns the futures.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from engines.frames import FrameItem, FrameOutput
from gateway.monitoring.records import Outcome
from gateway.scheduler.estimator import BatchTimeEstimator
from gateway.scheduler.partners import (
    DEADLINE,
    DISPATCH_REASONS,
    FULL,
    MAX_DELAY,
    PARTNER_NOT_EXPECTED,
    ArrivalTracker,
    WaitChoice,
    choose_wait,
    partner_arrivals,
)

# Timer wake-ups may land a hair before the instant they were armed for; treat that as "on time".
_EPS_S = 1e-6


@dataclass(frozen=True)
class SchedulerConfig:
    max_batch: int = 8
    max_queue_delay_ms: float = 4.0
    workers: int = 1
    budget_ms: float = 150.0
    batch_wait: str = "cost"  # "cost": wait for partners only when it pays; "window": the fixed window
    probe_after_ms: float = 250.0  # no batch completed for this long, workers idle: run one "late" frame
    # A frame's deadline is also its session's frame interval after arrival (its successor is due then), or
    # this many single-frame batch times if that is longer; 0 = off (the budget alone).
    interval_deadline_batches: float = 3.0

    def __post_init__(self) -> None:
        if self.batch_wait not in ("cost", "window"):
            raise ValueError(f"batch_wait must be 'cost' or 'window', got {self.batch_wait!r}")
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {self.max_batch}")
        if self.max_queue_delay_ms < 0:
            raise ValueError(f"max_queue_delay_ms must be >= 0, got {self.max_queue_delay_ms}")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        if self.budget_ms <= 0:
            raise ValueError(f"budget_ms must be > 0, got {self.budget_ms}")
        if self.probe_after_ms <= 0:
            raise ValueError(f"probe_after_ms must be > 0, got {self.probe_after_ms}")
        if self.interval_deadline_batches < 0:
            raise ValueError(f"interval_deadline_batches must be >= 0, got {self.interval_deadline_batches}")


@dataclass
class ScheduledFrame:
    """The fate of one submitted frame. `error` says why, for ERROR outcomes."""

    outcome: Outcome
    output: FrameOutput | None
    queue_wait_ms: float  # submit → dispatch (or → drop)
    batch_size: int  # items in the batch that ran it; 0 when it never ran
    process_ms: float  # dispatch → batch finished; 0 when it never ran
    error: str | None = None


@dataclass(frozen=True)
class Pending:
    """One frame waiting in (or dispatched by) the policy."""

    ticket: int
    session_id: str
    frame_id: int
    item: FrameItem
    arrival_s: float
    deadline_s: float  # effective: min(caller's deadline, arrival + budget)
    enqueued_s: float  # when the policy got it (queue-delay clock starts here)


@dataclass(frozen=True)
class Plan:
    """A batch to run: items in dispatch order, from distinct sessions."""

    batch_id: int
    items: tuple[Pending, ...]
    dispatched_s: float
    predicted_ms: float
    reason: str = FULL

    @property
    def frames(self) -> list[FrameItem]:
        return [p.item for p in self.items]


Resolution = tuple[int, ScheduledFrame]


@dataclass(frozen=True)
class Decision:
    """What `schedule` decided: at most one batch to start, frames it rejected, and when to ask again.

    `wake_at` is the next instant at which the decision could change without any new event (a queue delay
    expiring, a deadline becoming unreachable); None means only a submit or a completion can change it.
    """

    plan: Plan | None
    resolved: tuple[Resolution, ...]
    wake_at: float | None


class BatchPolicy:
    """Pure cross-session batching state machine. Not thread-safe: one owner (the coordinator) calls it."""

    def __init__(
        self,
        config: SchedulerConfig,
        estimator: BatchTimeEstimator | None = None,
        active_horizon_s: float = 1.0,
    ) -> None:
        self._config = config
        self._estimator = estimator or BatchTimeEstimator()
        self._active_horizon_s = active_horizon_s
        self._max_batch = config.max_batch
        self._pending: dict[str, Pending] = {}
        self._last_submit: dict[str, float] = {}
        self._in_flight: dict[int, Plan] = {}
        self._busy_sessions: set[str] = set()
        self._arrivals = ArrivalTracker()
        self._held: set[int] = set()  # tickets a wait decision held back (counted once dispatched)
        self._tickets = itertools.count(1)
        self._batch_ids = itertools.count(1)
        self._counts: dict[str, int] = {
            "submitted": 0,
            "batches": 0,
            "batched_items": 0,
            "processed": 0,
            "stale": 0,
            "deadline": 0,
            "errors": 0,
            "waited": 0,
            "probes": 0,
        }
        self._confirmed_s: float | None = None  # last successful completion (or when rejecting began)
        self._reasons: dict[str, int] = dict.fromkeys(DISPATCH_REASONS, 0)

    # --- inputs -------------------------------------------------------------------------------------------

    @property
    def estimator(self) -> BatchTimeEstimator:
        return self._estimator

    @property
    def max_batch(self) -> int:
        return self._max_batch

    def set_max_batch(self, n: int) -> None:
        """Lower (or restore) the batch cap; the configured `max_batch` stays the ceiling."""
        self._max_batch = max(1, min(int(n), self._config.max_batch))

    def submit(
        self, session_id: str, frame_id: int, item: FrameItem, arrival_s: float, deadline_s: float, now: float
    ) -> tuple[int, list[Resolution]]:
        """Queue a frame; returns its ticket and the older pending frame it replaced (resolved stale)."""
        self._arrivals.observe(session_id, now)
        deadline = min(deadline_s, arrival_s + self._config.budget_ms / 1000.0)
        interval_cap = self._interval_cap_s(session_id)
        if interval_cap is not None:
            deadline = min(deadline, arrival_s + interval_cap)
        ticket = next(self._tickets)
        resolved: list[Resolution] = []
        old = self._pending.get(session_id)
        if old is not None:
            resolved.append(self._drop(old, Outcome.DROPPED_STALE, now))
        self._pending[session_id] = Pending(ticket, session_id, frame_id, item, arrival_s, deadline, now)
        self._last_submit[session_id] = now
        self._counts["submitted"] += 1
        return ticket, resolved

    def _interval_cap_s(self, session_id: str) -> float | None:
        """How long after its arrival a frame of this session is still worth processing: until its successor
        is due (the session's frame interval, with its jitter), or `interval_deadline_batches` single-frame
        batch times if that is longer, so a frame that costs more than the interval still runs. A frame that
        would finish later is rejected up front (or its batch shrunk) rather than making every later frame
        of the machine wait behind it (measured: lower p95 below capacity, capacity even; docs/BENCHMARKS.md).
        None when off or while the session's interval is still unknown (the budget alone)."""
        factor = self._config.interval_deadline_batches
        interval = self._arrivals.steady_interval(session_id) if factor > 0 else None
        if interval is None:
            return None
        return max(interval, factor * self._estimator.predict_ms(1) / 1000.0)

    def remove_session(self, session_id: str, now: float) -> list[Resolution]:
        """Forget a session; its pending frame resolves stale. A frame in flight still completes normally."""
        self._last_submit.pop(session_id, None)
        self._arrivals.forget(session_id)
        old = self._pending.get(session_id)
        return [self._drop(old, Outcome.DROPPED_STALE, now)] if old is not None else []

    def drain(self, now: float) -> list[Resolution]:
        """Resolve every pending frame stale (shutdown). Frames in flight are left to `complete`."""
        return [self._drop(p, Outcome.DROPPED_STALE, now) for p in list(self._pending.values())]

    # --- decisions ----------------------------------------------------------------------------------------

    def schedule(self, now: float) -> Decision:
        """Decide whether a batch starts now. Call again after every submit, completion, and at `wake_at`."""
        resolved = self._expire(now)
        wake = self._next_expiry()
        if len(self._in_flight) >= self._config.workers:
            return Decision(None, tuple(resolved), wake)
        eligible = sorted(
            (p for s, p in self._pending.items() if s not in self._busy_sessions),
            key=lambda p: (p.enqueued_s, p.ticket),
        )
        if not eligible:
            return Decision(None, tuple(resolved), wake)

        limit = self._max_batch
        candidates = eligible[:limit]
        flush_at = candidates[0].enqueued_s + self._config.max_queue_delay_ms / 1000.0
        predicted_s = self._estimator.predict_ms(len(candidates)) / 1000.0
        urgent_at = min(p.deadline_s for p in candidates) - predicted_s
        if len(candidates) >= limit:
            reason = FULL
        elif now + _EPS_S >= urgent_at:
            reason = DEADLINE
        elif now + _EPS_S >= flush_at:
            reason = MAX_DELAY
        else:
            choice = self._wait_choice(now, len(candidates), limit, min(flush_at, urgent_at))
            if choice.wait_until is not None:
                self._held.add(candidates[0].ticket)
                wake_at = _earliest(wake, choice.wait_until, flush_at, urgent_at)
                return Decision(None, tuple(resolved), wake_at)
            reason = choice.reason

        batch = candidates
        predicted_ms = self._estimator.predict_ms(len(batch))
        while len(batch) > 1 and any(p.deadline_s < now + predicted_ms / 1000.0 for p in batch):
            batch = batch[:-1]
            predicted_ms = self._estimator.predict_ms(len(batch))

        plan = Plan(next(self._batch_ids), tuple(batch), now, predicted_ms, reason)
        self._reasons[reason] += 1
        if any(p.ticket in self._held for p in batch):
            self._counts["waited"] += 1
        for p in batch:
            self._held.discard(p.ticket)
            del self._pending[p.session_id]
            self._busy_sessions.add(p.session_id)
        self._in_flight[plan.batch_id] = plan
        self._counts["batches"] += 1
        self._counts["batched_items"] += len(batch)
        return Decision(plan, tuple(resolved), self._next_expiry())

    def complete(self, plan: Plan, result: list[FrameOutput] | BaseException, now: float) -> list[Resolution]:
        """Map a finished batch back to its items and learn its duration (successful batches only)."""
        if self._in_flight.pop(plan.batch_id, None) is None:
            raise ValueError(f"batch {plan.batch_id} is not in flight")
        for p in plan.items:
            self._busy_sessions.discard(p.session_id)
        n = len(plan.items)
        process_ms = max(0.0, (now - plan.dispatched_s) * 1000.0)
        error: str | None = None
        if isinstance(result, BaseException):
            error = f"{type(result).__name__}: {result}"
        elif len(result) != n:
            error = f"process returned {len(result)} outputs for {n} items"
        out: list[Resolution] = []
        if error is not None:
            self._counts["errors"] += n
            for p in plan.items:
                wait = (plan.dispatched_s - p.enqueued_s) * 1000.0
                out.append((p.ticket, ScheduledFrame(Outcome.ERROR, None, wait, n, process_ms, error)))
            return out
        assert not isinstance(result, BaseException)
        self._estimator.observe(n, process_ms)
        self._confirmed_s = now
        self._counts["processed"] += n
        for p, output in zip(plan.items, result, strict=True):
            wait = (plan.dispatched_s - p.enqueued_s) * 1000.0
            out.append((p.ticket, ScheduledFrame(Outcome.PROCESSED, output, wait, n, process_ms)))
        return out

    # --- introspection ------------------------------------------------------------------------------------

    @property
    def queued(self) -> int:
        return len(self._pending)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def stats(self) -> dict[str, float]:
        c = self._counts
        out: dict[str, float] = {
            "queued": float(len(self._pending)),
            "in_flight_batches": float(len(self._in_flight)),
            "max_batch": float(self._max_batch),
            "submitted": float(c["submitted"]),
            "batches_run": float(c["batches"]),
            "batched_items": float(c["batched_items"]),
            "mean_batch_size": c["batched_items"] / c["batches"] if c["batches"] else 0.0,
            "processed": float(c["processed"]),
            "dropped_stale": float(c["stale"]),
            "dropped_deadline": float(c["deadline"]),
            "errors": float(c["errors"]),
            "est_batch_ms": self._estimator.predict_ms(self._max_batch),
            "est_single_ms": self._estimator.predict_ms(1),
            "batches_waited": float(c["waited"]),
            "deadline_probes": float(c["probes"]),
        }
        out.update({f"dispatch_{r}": float(n) for r, n in self._reasons.items()})
        out.update(self._estimator.snapshot())
        return out

    # --- internals ----------------------------------------------------------------------------------------

    def _drop(self, p: Pending, outcome: Outcome, now: float) -> Resolution:
        del self._pending[p.session_id]
        self._held.discard(p.ticket)
        self._counts["stale" if outcome is Outcome.DROPPED_STALE else "deadline"] += 1
        return p.ticket, ScheduledFrame(outcome, None, max(0.0, (now - p.enqueued_s) * 1000.0), 0, 0.0)

    def _expire(self, now: float) -> list[Resolution]:
        """Reject pending frames that could not finish in time even as a batch of one starting now."""
        single_s = self._estimator.predict_ms(1) / 1000.0
        # Finishing exactly at the deadline is in time (that is when an urgent batch starts); `_next_expiry`
        # wakes us just past that instant.
        late = [p for p in self._pending.values() if now + single_s > p.deadline_s + _EPS_S]
        if late and not self._in_flight and self._probe_due(now):
            probe = max(late, key=lambda p: (p.deadline_s, p.ticket))
            late.remove(probe)
            self._counts["probes"] += 1
        return [self._drop(p, Outcome.DROPPED_DEADLINE, now) for p in late]

    def _probe_due(self, now: float) -> bool:
        """Whether the estimate has gone unconfirmed for `probe_after_ms` (its clock starts at the first
        rejection when nothing has completed yet, e.g. with an estimator fed elsewhere)."""
        if self._confirmed_s is None:
            self._confirmed_s = now
            return False
        return now - self._confirmed_s >= self._config.probe_after_ms / 1000.0

    def _next_expiry(self) -> float | None:
        if not self._pending:
            return None
        single_s = self._estimator.predict_ms(1) / 1000.0
        return min(p.deadline_s for p in self._pending.values()) - single_s + 2 * _EPS_S

    def _wait_choice(self, now: float, present: int, limit: int, horizon: float) -> WaitChoice:
        """Wait for partners (and until when), or why not: the configured `batch_wait` rule."""
        partners = self._partners(now)
        if not partners:
            return WaitChoice(None, PARTNER_NOT_EXPECTED)
        if self._config.batch_wait == "window":
            return WaitChoice(horizon, "")
        return choose_wait(
            now,
            present,
            limit - present,
            partner_arrivals(self._arrivals, partners, now),
            horizon,
            self._estimator.predict_ms,
            free_worker_after=len(self._in_flight) + 1 < self._config.workers,
        )

    def _partners(self, now: float) -> list[str]:
        """Active sessions not yet pending nor in flight: those that could add a frame to the next batch."""
        horizon = now - self._active_horizon_s
        for sid in [s for s, last in self._last_submit.items() if last < horizon]:
            del self._last_submit[sid]  # went quiet without remove_session: stop waiting for it
            self._arrivals.forget(sid)
        return [s for s in self._last_submit if s not in self._pending and s not in self._busy_sessions]


def _earliest(*times: float | None) -> float | None:
    finite = [t for t in times if t is not None and math.isfinite(t)]
    return min(finite) if finite else None
