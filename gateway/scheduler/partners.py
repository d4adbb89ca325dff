"""Should a ready frame wait for batch partners? Pure: arrival history and a cost model in, a choice out.

A fixed window costs every frame the whole wait on the CPU, where streams are unsynchronised and a batch of
b costs about b batches of one. `ArrivalTracker` predicts each session's next frame from its own arrivals
(a smoothed period and its deviation, as RFC 6298 estimates round trips); `choose_wait` compares the summed
latency of dispatching now against waiting for the expected partners, with the estimator's measured cost per
batch size: on the CPU waiting almost never pays, on a GPU it often does. The wait is capped by the horizon
(max queue delay, deadlines); the reasons batches leave (`DISPATCH_REASONS`) are shown in /api/stats.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

FULL = "full"  # max_batch frames were ready
DEADLINE = "deadline"  # waiting longer would make a frame miss its deadline
MAX_DELAY = "max_delay"  # the oldest frame waited max_queue_delay_ms
PARTNER_NOT_EXPECTED = "partner_not_expected"  # no other session is expected before the wait cap
WAIT_NOT_WORTH_IT = "wait_not_worth_it"  # partners are expected, but the cost model says go now
DISPATCH_REASONS: tuple[str, ...] = (FULL, DEADLINE, MAX_DELAY, PARTNER_NOT_EXPECTED, WAIT_NOT_WORTH_IT)


@dataclass(frozen=True)
class ArrivalConfig:
    alpha: float = 0.125  # weight of the newest interval in the smoothed period (RFC 6298)
    beta: float = 0.25  # weight of the newest deviation
    min_intervals: int = 2  # intervals seen before a session's next frame counts as predictable
    max_interval_s: float = 1.0  # a longer gap is a pause, not a period: history restarts
    min_slack_s: float = 0.0005  # timer and scheduling noise even for a perfectly regular source

    def __post_init__(self) -> None:
        if not (0.0 < self.alpha <= 1.0 and 0.0 < self.beta <= 1.0):
            raise ValueError("alpha and beta must be in (0, 1]")
        if self.min_intervals < 1 or self.max_interval_s <= 0 or self.min_slack_s < 0:
            raise ValueError("min_intervals must be >= 1, max_interval_s > 0, min_slack_s >= 0")


@dataclass
class _History:
    last_s: float
    period_s: float = 0.0
    dev_s: float = 0.0
    intervals: int = 0


class ArrivalTracker:
    """Per-session periodic arrival model: when is each session's next frame due?"""

    def __init__(self, config: ArrivalConfig | None = None) -> None:
        self._config = config or ArrivalConfig()
        self._sessions: dict[str, _History] = {}

    def observe(self, session_id: str, t: float) -> None:
        """A frame of `session_id` arrived at `t` (monotonic seconds)."""
        h = self._sessions.get(session_id)
        if h is None:
            self._sessions[session_id] = _History(last_s=t)
            return
        gap = t - h.last_s
        h.last_s = t
        if gap <= 0.0:
            return  # two frames in one instant (a burst after a stall): says nothing about the period
        if gap > self._config.max_interval_s:
            h.period_s, h.dev_s, h.intervals = 0.0, 0.0, 0
            return
        c = self._config
        if h.intervals == 0:
            # Unlike RTT samples (RFC 6298 starts the deviation at R/2), a camera's frame interval is regular:
            # start confident and let the deviation grow with observed jitter.
            h.period_s, h.dev_s = gap, 0.0
        else:
            h.dev_s = (1.0 - c.beta) * h.dev_s + c.beta * abs(gap - h.period_s)
            h.period_s = (1.0 - c.alpha) * h.period_s + c.alpha * gap
        h.intervals += 1

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def expected(self, session_id: str, now: float) -> tuple[float, float] | None:
        """(predicted arrival, slack) of the session's next frame not yet arrived, or None if unpredictable.

        A frame overdue by more than its slack is taken as skipped: the prediction rolls forward by whole
        periods, so a session that lost one frame is still expected at its next slot.
        """
        h = self._steady(session_id)
        c = self._config
        if h is None or now - h.last_s > c.max_interval_s:
            return None
        slack = max(c.min_slack_s, 2.0 * h.dev_s)
        nxt = h.last_s + h.period_s
        if nxt + slack < now:
            nxt += math.ceil((now - slack - nxt) / h.period_s) * h.period_s
        return nxt, slack

    def period(self, session_id: str) -> float | None:
        h = self._sessions.get(session_id)
        return h.period_s if h is not None and h.intervals > 0 else None

    def steady_interval(self, session_id: str) -> float | None:
        """The session's frame interval with its jitter allowance (period + 2 deviations), once it has been
        seen for `min_intervals` intervals; None before that or for an unknown session."""
        h = self._steady(session_id)
        return None if h is None else h.period_s + 2.0 * h.dev_s

    def _steady(self, session_id: str) -> _History | None:
        """The session's history once its period is known (`min_intervals` intervals seen), else None."""
        h = self._sessions.get(session_id)
        if h is None or h.intervals < self._config.min_intervals or h.period_s <= 0.0:
            return None
        return h


@dataclass(frozen=True)
class WaitChoice:
    """`wait_until` None: dispatch now, for `reason`. Otherwise re-decide at `wait_until` (or on a submit)."""

    wait_until: float | None
    reason: str
    partners: int = 0  # how many partners the chosen wait expects
    gain_ms: float = 0.0  # frame-milliseconds the chosen plan saves over the other


def choose_wait(
    now: float,
    present: int,
    room: int,
    partner_arrivals: Sequence[tuple[float, float]],
    horizon: float,
    cost_ms: Callable[[int], float],
    free_worker_after: bool,
) -> WaitChoice:
    """Wait for expected partners only when that lowers the summed latency of the frames involved.

    `partner_arrivals`: (expected, latest) arrival instant of each predictable partner. The gain is judged on
    the expected instants; the wait lasts until the chosen partners' latest instant, capped at `horizon`
    (the queue delay, deadlines), and any submit before that re-decides. `room`: how many more frames the
    batch can take. `free_worker_after`: another worker would be free for the partners' own batch if this
    one left now.
    """
    reachable = sorted(a for a in partner_arrivals if a[0] <= horizon)[: max(0, room)]
    if not reachable:
        return WaitChoice(None, PARTNER_NOT_EXPECTED)
    k = present
    c_k = cost_ms(k)
    best: WaitChoice | None = None
    latest = now
    for j, (t_j, late_j) in enumerate(reachable, start=1):
        latest = max(latest, late_j)
        wait_ms = max(0.0, (t_j - now) * 1000.0)
        second_start = wait_ms if free_worker_after else max(c_k, wait_ms)
        # Partners' arrival times appear identically in both sums, so they cancel; time is measured from now.
        go_now = k * c_k + j * (second_start + cost_ms(j))
        together = (k + j) * (wait_ms + cost_ms(k + j))
        gain = go_now - together
        if gain > 0.0 and (best is None or gain > best.gain_ms):
            best = WaitChoice(min(latest, horizon), "", j, gain)
    return best if best is not None else WaitChoice(None, WAIT_NOT_WORTH_IT)


def partner_arrivals(
    tracker: ArrivalTracker, sessions: Sequence[str], now: float
) -> list[tuple[float, float]]:
    """(expected, latest = expected + slack) next arrival of each listed session that is predictable."""
    out: list[tuple[float, float]] = []
    for sid in sessions:
        exp = tracker.expected(sid, now)
        if exp is not None:
            out.append((exp[0], exp[0] + exp[1]))
    return out
