"""Which sessions to close because their peer vanished: a pure verdict per session, applied by the manager.

A session in any state past its deadline goes; one whose close has hung past `connect_timeout_s` is dropped
from the table, as its slot must not stay taken.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    reason: str
    drop: bool = False  # its close hung: forget it now instead of closing it again


def verdict(
    *,
    now: float,
    state: str,
    created_s: float,
    connected_s: float | None,
    last_frame_s: float | None,
    close_reason: str | None,
    closed_s: float | None,
    connect_timeout_s: float,
    reap_after_s: float,
) -> Verdict | None:
    if close_reason is not None:
        if closed_s is not None and now - closed_s > connect_timeout_s:
            return Verdict(close_reason, drop=True)
        return None
    if state in ("failed", "closed"):
        return Verdict(f"peer {state}")
    if connected_s is None and now - created_s > connect_timeout_s:
        return Verdict("never connected")
    if connected_s is not None and now - max(last_frame_s or connected_s, connected_s) > reap_after_s:
        return Verdict(f"no media for {reap_after_s:g}s ({state})")
    return None
