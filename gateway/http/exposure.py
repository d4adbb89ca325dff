"""What /api/stats (and its SSE stream) show to whom.

The monitor's snapshot lists every session by id, with its source id. Ids are what DELETE, PATCH and WHEP act
on, so only an admin (or, with no token configured, everyone) sees them all; a tenant sees its own; a caller
without a token (reads are open unless --protect-reads) sees the numbers with every id replaced. Source
memory (gateway.source_store) is added here: it is the gateway's figure, not the monitor's.
"""

from __future__ import annotations

import dataclasses
import json

from aiohttp import web

from gateway.http.keys import STATE, principal_of
from gateway.monitoring.snapshot import StatsSnapshot

REDACTED = "redacted"


def stats_view(request: web.Request, data: dict[str, object]) -> dict[str, object]:
    state = request.app[STATE]
    state.sources.expire()
    out = {**data, "sources": state.sources.stats()}
    principal = principal_of(request)
    if principal.admin:
        return out
    owners = {sid: s.owner for sid, s in (state.sessions.sessions.items() if state.sessions else ())}
    hidden = {sid for sid, owner in owners.items() if not principal.owns(owner)}
    hidden |= {sid for sid in state.sources if not principal.owns(state.sources.owner(sid))}
    sessions = out.get("sessions")
    if isinstance(sessions, dict) and isinstance(sessions.get("list"), list):
        for entry in sessions["list"]:
            sid = entry.get("session_id") if isinstance(entry, dict) else None
            if isinstance(sid, str) and not (sid in owners and principal.owns(owners[sid])):
                hidden.add(sid)  # closed sessions' owners are no longer known: hidden from non-admins
    return _scrub(out, hidden)


def metrics_view(request: web.Request, snap: StatsSnapshot) -> StatsSnapshot:
    """/metrics labels per-session series with the session id: callers who may not see an id get
    `redacted-N` instead (distinct per series, the same count of sessions)."""
    principal = principal_of(request)
    if principal.admin:
        return snap
    state = request.app[STATE]
    owners = {sid: s.owner for sid, s in (state.sessions.sessions.items() if state.sessions else ())}
    shown = []
    for n, stats in enumerate(snap.sessions, 1):
        sid = stats.session_id
        if not (sid in owners and principal.owns(owners[sid])):
            stats = dataclasses.replace(stats, session_id=f"{REDACTED}-{n}", info={})
        shown.append(stats)
    return dataclasses.replace(snap, sessions=tuple(shown), events=())


def without_sessions(request: web.Request, snap: StatsSnapshot) -> StatsSnapshot:
    """/metrics without the per-session families' series: one `session` label value per publisher ever
    seen grows a Prometheus without bound (every session is a new series), so it is opt-in."""
    return dataclasses.replace(snap, sessions=())


def _scrub(data: dict[str, object], hidden: set[str]) -> dict[str, object]:
    """Every occurrence of a hidden id (in the session list, in event messages and data) becomes REDACTED."""
    if not hidden:
        return data
    text = json.dumps(data, default=str)
    for secret in sorted(hidden, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    scrubbed: dict[str, object] = json.loads(text)
    return scrubbed
