"""Who may open a session now: a pure decision over counts, applied by the manager.

Offers that never connect (a scanner, a broken client) hold at most `max_pending` slots; when those are
full, the oldest pending session that has had `pending_grace_s` to connect gives its slot to the newcomer,
so such offers delay a real publisher by at most one retry instead of locking it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    reject: str | None  # the monitor's reject reason; None: not counted (shutting down)
    message: str
    retry_after_s: int


@dataclass(frozen=True)
class Admission:
    refusal: Refusal | None = None
    evict_oldest_pending: bool = False  # done before a refusal that follows it, as its slot is stale


def decide(
    *,
    now: float,
    accepting: bool,
    owner: str | None,
    owner_sessions: int,
    owner_limit: int | None,
    pending_created: Sequence[float],
    sessions: int,
    max_pending: int,
    pending_grace_s: float,
    max_sessions: int,
    governor_admits: bool,
) -> Admission:
    """`pending_created`: when each not-yet-connected session was created, oldest first."""
    if not accepting:
        return Admission(Refusal(None, "gateway is shutting down", 30))
    if owner_limit is not None and owner_sessions >= owner_limit:
        message = f"tenant {owner} is at its limit ({owner_limit} sessions)"
        return Admission(Refusal("tenant_limit", message, 5))
    evict = False
    if len(pending_created) >= max_pending:
        if now - pending_created[0] < pending_grace_s:
            return Admission(Refusal("pending", f"too many sessions still connecting ({max_pending})", 2))
        evict, sessions = True, sessions - 1
    if sessions >= max_sessions:
        return Admission(Refusal("capacity", f"at capacity ({max_sessions} sessions)", 10), evict)
    if not governor_admits:
        message = "overloaded: the monitor refuses new sessions for now"
        return Admission(Refusal("capacity", message, 10), evict)
    return Admission(None, evict)
