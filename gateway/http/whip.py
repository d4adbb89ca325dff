"""WHIP (RFC 9725): POST /whip creates a session from an SDP offer; DELETE /whip/{id} ends it.

The publisher gets its processed video back on the same peer connection (sendrecv). Query: ?source=<id>
(else the configured default source) and ?processors=face_swapper,face_enhancer (or none: pass-through);
?mask=mouth,eyes|mouth|eyes|none (target regions kept), ?faces=many|one|reference (&reference=<source id>);
?shape=0..1 (how much of the source's face shape the swap takes);
?egress=<WHIP URL>|none (gateway.http.egress).
"""

from __future__ import annotations

import time

from aiohttp import web

from gateway.errors import (
    BadRequest,
    NotFound,
    PreconditionFailed,
    PreconditionRequired,
    Unprocessable,
    UnsupportedMediaType,
)
from gateway.http import egress
from gateway.http.keys import CONFIG, STATE, principal_of, sessions_of
from gateway.http.request_checks import SDP_TYPE, TRICKLE_TYPE, read_offer_text, read_trickle_fragment
from gateway.http.sources import visible_source
from gateway.http.urls import resource_url
from gateway.marking.config import check_label, disclosure_headers
from gateway.session import Session
from gateway.session.settings import Lookups, SessionSettings, default_faces, in_query, parse, query_values
from gateway.tenants import tenant_label, tenant_limit
from gateway.webrtc.interop.dtls_peers import dtls_choice
from gateway.webrtc.interop.ice import link_headers
from gateway.webrtc.negotiation.sdp import SdpError

VIEWER_TOKEN_HEADER = "Livefuse-Viewer-Token"  # WHEP may use it (as a bearer token) for this session only


async def read_offer(request: web.Request) -> str:
    config = request.app[CONFIG]
    return await read_offer_text(request, config.max_sdp_bytes, config.body_timeout_s)


def choose_settings(request: web.Request) -> SessionSettings:
    """?source= (else the default source), ?processors=, ?mask=, ?faces= (with ?reference=) and ?shape=,
    read by the sessions' one parser (gateway.session.settings); face settings None when none is given (the
    gateway's defaults apply)."""
    app = request.app
    defaults = SessionSettings(None, app[CONFIG].pipeline.processors, None)
    lookups = Lookups(
        default_faces(app[CONFIG].pipeline),
        lambda sid: visible_source(request, sid),
        bool(getattr(app[STATE].pipeline, "supports_reference", False)),
        in_query,
    )
    return parse(query_values(request.query, app[STATE].default_source_id), defaults, lookups)


def owned_session(request: web.Request) -> Session:
    """The session in the URL when the caller's tenant owns it (or is an admin); else 404, as if unknown."""
    session = sessions_of(request.app).get(request.match_info["session_id"])
    if not principal_of(request).owns(session.owner):
        raise NotFound(f"no session {session.id!r}")
    return session


def choose_dtls(request: web.Request) -> bool | None:
    """`?dtls=auto|1.0|1.2` (webrtc.interop.dtls_peers.dtls_choice)."""
    try:
        return dtls_choice(request.query.get("dtls"))
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def choose_label(request: web.Request, owner: str | None) -> str | None:
    """The session's visible label: `?label=` (empty: none), else its tenant's, else --disclosure-label."""
    config = request.app[CONFIG]
    if "label" in request.query:
        try:
            return check_label(request.query["label"])
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
    return tenant_label(config.auth.all_tenants, owner) or config.sessions.marking.label


async def options_whip(request: web.Request) -> web.Response:
    headers = {"Accept-Post": SDP_TYPE}  # CORS headers, where an origin is allowed: gateway.http.cors
    links = link_headers(request.app[CONFIG].ice)
    response = web.Response(status=204, headers=headers)
    for link in links:
        response.headers.add("Link", link)
    return response


async def post_whip(request: web.Request) -> web.Response:
    post_s = time.monotonic()  # the origin of the session's timeline (gateway.session.timeline)
    offer = await read_offer(request)
    config = request.app[CONFIG]
    settings = choose_settings(request)
    owner = principal_of(request).tenant
    legacy_dtls = choose_dtls(request)
    egress_target = await egress.requested_target(request)
    label = choose_label(request, owner)
    try:
        session, answer = await sessions_of(request.app).create(
            offer,
            source=settings.source,
            processors=settings.processors,
            owner=owner,
            owner_limit=tenant_limit(config.auth.all_tenants, owner),
            face_settings=settings.faces,
            user_agent=request.headers.get("User-Agent"),
            legacy_dtls=legacy_dtls,
            label=label,
            post_s=post_s,
        )
    except SdpError as exc:
        raise BadRequest(str(exc)) from None
    egress.begin(request.app, session, egress_target)
    response = web.Response(
        status=201,
        text=answer,
        content_type=SDP_TYPE,
        headers={
            "Location": resource_url(config.public_url, f"/whip/{session.id}"),
            "ETag": f'"{session.etag}"',
            "Accept-Patch": TRICKLE_TYPE,
            VIEWER_TOKEN_HEADER: session.viewer_token,
            **disclosure_headers(config.sessions.marking),
        },
    )
    for link in link_headers(config.ice):
        response.headers.add("Link", link)
    return response


async def delete_whip(request: web.Request) -> web.Response:
    await owned_session(request).close("deleted by client")
    return web.Response(status=200)


async def patch_whip(request: web.Request) -> web.Response:
    """Trickle ICE (RFC 9725 §4.3.1): the client's late candidates. Our answer already carries all of ours,
    so the reply is 204. ICE restarts (a new ufrag) are refused: the client creates a new session."""
    session = owned_session(request)  # 404 first
    if request.content_type != TRICKLE_TYPE:
        raise UnsupportedMediaType(f"Content-Type must be {TRICKLE_TYPE}")
    if_match = request.headers.get("If-Match")
    if if_match is None:
        raise PreconditionRequired("If-Match with the session's ETag is required")
    if if_match.strip() not in ("*", f'"{session.etag}"'):
        raise PreconditionFailed("If-Match does not match the session's ETag")
    config = request.app[CONFIG]
    _, fragment = await read_trickle_fragment(request, config.max_sdp_bytes, config.body_timeout_s)
    try:
        await session.add_remote_candidates(fragment)
    except SdpError as exc:
        raise Unprocessable(str(exc)) from None
    return web.Response(status=204, headers={"ETag": f'"{session.etag}"'})


async def options_resource(request: web.Request) -> web.Response:
    return web.Response(status=204)


def add_routes(app: web.Application) -> None:
    app.router.add_route("OPTIONS", "/whip", options_whip)
    app.router.add_post("/whip", post_whip)
    app.router.add_route("OPTIONS", "/whip/{session_id}", options_resource)
    app.router.add_delete("/whip/{session_id}", delete_whip)
    app.router.add_patch("/whip/{session_id}", patch_whip)
