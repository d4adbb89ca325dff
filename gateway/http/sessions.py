"""GET /sessions and GET /sessions/{id}: the session list and one session's live stats."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.http.keys import MONITOR, principal_of, sessions_of
from gateway.http.whip import owned_session
from gateway.session import Session


def _describe(request: web.Request, session: Session) -> dict[str, Any]:
    info = session.summary()
    try:
        info["stats"] = request.app[MONITOR].session_stats(session.id)
    except KeyError:  # created but not yet announced to the monitor (its offer is still being answered)
        info["stats"] = {}
    return info


async def list_sessions(request: web.Request) -> web.Response:
    """The caller's own sessions (an admin's: all). Callers without a token (reads left open without
    --protect-reads) see only how many sessions are open: ids are what DELETE, PATCH and WHEP act on."""
    manager = sessions_of(request.app)
    principal = principal_of(request)
    open_sessions = [s for s in list(manager.sessions.values()) if s.close_reason is None]
    mine = [s for s in open_sessions if principal.owns(s.owner)]
    return web.json_response(
        {
            "sessions": [_describe(request, s) for s in mine],
            "open": len(open_sessions),
            "max_sessions": manager.config.max_sessions,
        }
    )


async def get_session(request: web.Request) -> web.Response:
    """One session, for its owner (or an admin) only: anyone else gets 404, as for an unknown id."""
    return web.json_response(_describe(request, owned_session(request)))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/sessions", list_sessions)
    app.router.add_get("/sessions/{session_id}", get_session)
