"""WHEP: POST /whep/{session_id} with an SDP offer -> a viewer of that session's processed stream.

The stream is encoded once per session and its packets fanned out to every viewer (gateway.media.fanout);
a new viewer triggers a keyframe so its picture starts at once. DELETE /whep/{session_id}/{viewer_id} ends it.
"""

from __future__ import annotations

from aiohttp import web

from gateway.auth import bearer_token
from gateway.errors import NotFound, Unauthorized
from gateway.http.keys import CONFIG, principal_of, sessions_of
from gateway.http.request_checks import SDP_TYPE, read_checked_offer
from gateway.http.urls import resource_url
from gateway.marking.config import disclosure_headers
from gateway.session import Session
from gateway.tenants import same_secret
from gateway.webrtc.interop.ice import link_headers


def viewable_session(request: web.Request) -> Session:
    """The session when the caller may watch it: its owner's or an admin token, or its own viewer token.
    A caller with no valid token gets 401; a tenant that does not own it gets 404 (as if unknown)."""
    session = sessions_of(request.app).get(request.match_info["session_id"])
    principal = principal_of(request)
    if principal.owns(session.owner):
        return session
    offered = bearer_token(request.headers)
    if offered is not None and same_secret(offered, session.viewer_token):
        return session
    if principal.anonymous:
        raise Unauthorized("a viewer token or the owner's token is required")
    raise NotFound(f"no session {session.id!r}")


async def post_whep(request: web.Request) -> web.Response:
    session = viewable_session(request)
    config = request.app[CONFIG]
    offer = await read_checked_offer(request, config.max_sdp_bytes, config.body_timeout_s, need_send=False)
    viewer_id, answer = await session.add_viewer(offer, config.ice)
    response = web.Response(
        status=201,
        text=answer,
        content_type=SDP_TYPE,
        headers={
            "Location": resource_url(config.public_url, f"/whep/{session.id}/{viewer_id}"),
            **disclosure_headers(config.sessions.marking),
        },
    )
    for link in link_headers(config.ice):
        response.headers.add("Link", link)
    return response


async def delete_whep(request: web.Request) -> web.Response:
    session = viewable_session(request)
    if not await session.remove_viewer(request.match_info["viewer_id"]):
        raise NotFound("no such viewer")
    return web.Response(status=200)


async def options_whep(request: web.Request) -> web.Response:
    return web.Response(status=204, headers={"Accept-Post": SDP_TYPE})


def add_routes(app: web.Application) -> None:
    app.router.add_route("OPTIONS", "/whep/{session_id}", options_whep)
    app.router.add_post("/whep/{session_id}", post_whep)
    app.router.add_delete("/whep/{session_id}/{viewer_id}", delete_whep)
