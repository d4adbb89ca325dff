"""Admission: the pure decision the session manager applies to a new session."""

from __future__ import annotations

from typing import Any

from gateway.session.admission import Admission, Refusal, decide


def _admit(**changes: Any) -> Admission:
    args: dict[str, Any] = dict(
        now=100.0, accepting=True, owner=None, owner_sessions=0, owner_limit=None, pending_created=[],
        sessions=0, max_pending=2, pending_grace_s=5.0, max_sessions=4, governor_admits=True,
    )  # fmt: skip
    args.update(changes)
    return decide(**args)


def test_admits_while_there_is_room() -> None:
    assert _admit() == Admission()


def test_refusals_in_order_with_their_reject_reason() -> None:
    assert _admit(accepting=False).refusal == Refusal(None, "gateway is shutting down", 30)
    tenant = _admit(owner="a", owner_sessions=2, owner_limit=2).refusal
    assert tenant is not None and tenant.reject == "tenant_limit" and "tenant a" in tenant.message
    assert _admit(sessions=4).refusal == Refusal("capacity", "at capacity (4 sessions)", 10)
    overloaded = _admit(governor_admits=False).refusal
    assert overloaded is not None and overloaded.reject == "capacity" and "overloaded" in overloaded.message


def test_a_full_pending_budget_refuses_within_the_grace_period() -> None:
    found = _admit(pending_created=[98.0, 99.0], sessions=2)
    assert found.refusal is not None and found.refusal.reject == "pending" and not found.evict_oldest_pending


def test_the_oldest_pending_session_past_its_grace_gives_its_slot() -> None:
    assert _admit(pending_created=[90.0, 99.0], sessions=2) == Admission(None, evict_oldest_pending=True)
    # its slot counts as free: a full table admits the newcomer once the stale one is evicted
    assert _admit(pending_created=[90.0, 99.0], sessions=4) == Admission(None, evict_oldest_pending=True)
    # evicted even when the newcomer is then refused for another reason
    refused = _admit(pending_created=[90.0, 99.0], sessions=5)
    assert refused.evict_oldest_pending
    assert refused.refusal is not None and refused.refusal.reject == "capacity"
