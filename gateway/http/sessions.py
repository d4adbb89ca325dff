"""GET /sessions and GET /sessions/{id}: the session list and one session's live stats."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.http.keys import MONITOR, sessions_of


def _describe(request: web.Request, session_id: str) -> dict[str, Any]:
    session = sessions_of(request.app).get(session_id)
    info = session.summary()
    try:
        info["stats"] = request.app[MONITOR].session_stats(session_id)
    except KeyError:  # created but not yet announced to the monitor (its offer is still being answered)
        info["stats"] = {}
    return info


async def list_sessions(request: web.Request) -> web.Response:
    manager = sessions_of(request.app)
    return web.json_response(
        {
            "sessions": [
                _describe(request, sid) for sid, s in list(manager.sessions.items()) if s.close_reason is None
            ],
            "max_sessions": manager.config.max_sessions,
        }
    )


async def get_session(request: web.Request) -> web.Response:
    return web.json_response(_describe(request, request.match_info["session_id"]))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/sessions", list_sessions)
    app.router.add_get("/sessions/{session_id}", get_session)
