"""Reaping: the pure decision the session manager applies to a live session."""

from __future__ import annotations

from typing import Any

from gateway.session.reaping import Verdict, verdict


def _reap(**changes: Any) -> Verdict | None:
    args: dict[str, Any] = dict(
        now=100.0, state="connected", created_s=0.0, connected_s=1.0, last_frame_s=99.0, close_reason=None,
        closed_s=None, connect_timeout_s=10.0, reap_after_s=5.0,
    )  # fmt: skip
    args.update(changes)
    return verdict(**args)


def test_live_sessions_stay() -> None:
    assert _reap() is None
    assert _reap(connected_s=None, created_s=95.0, state="new") is None  # still within its connect time


def test_vanished_peers_are_closed() -> None:
    assert _reap(state="failed") == Verdict("peer failed")
    assert _reap(connected_s=None, created_s=80.0, state="connecting") == Verdict("never connected")
    assert _reap(last_frame_s=90.0) == Verdict("no media for 5s (connected)")
    assert _reap(last_frame_s=None, connected_s=90.0, state="disconnected") == Verdict(
        "no media for 5s (disconnected)"
    )


def test_a_hung_close_is_dropped_and_a_fresh_one_left_alone() -> None:
    assert _reap(close_reason="deleted", closed_s=99.0) is None
    assert _reap(close_reason="deleted", closed_s=80.0) == Verdict("deleted", drop=True)
