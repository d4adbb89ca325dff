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

from engines.frames import FACE_SELECTORS, MASK_REGIONS, PROCESSORS, FaceSettings, SourceFace, check_shape
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
from gateway.tenants import tenant_label, tenant_limit
from gateway.webrtc.interop.dtls_peers import dtls_choice
from gateway.webrtc.interop.ice import link_headers
from gateway.webrtc.negotiation.sdp import SdpError

VIEWER_TOKEN_HEADER = "Livefuse-Viewer-Token"  # WHEP may use it (as a bearer token) for this session only


async def read_offer(request: web.Request) -> str:
    config = request.app[CONFIG]
    return await read_offer_text(request, config.max_sdp_bytes, config.body_timeout_s)


def choose_processors(raw: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """Absent or empty -> the gateway's default; `none` -> () (pass-through); else known names only."""
    if raw is None or not raw.strip():
        return default
    names = tuple(p.strip() for p in raw.split(",") if p.strip() and p.strip().lower() != "none")
    unknown = [n for n in names if n not in PROCESSORS]
    if unknown:
        raise BadRequest(f"unknown processor(s) {', '.join(unknown)} (known: {', '.join(PROCESSORS)})")
    return names


def choose_source(request: web.Request) -> SourceFace | None:
    state = request.app[STATE]
    sid = request.query.get("source") or state.default_source_id
    if sid is None:
        return None
    face = visible_source(request, sid)
    if face is None:
        raise NotFound(f"no source {sid!r} (upload one with POST /sources)")
    return face


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


def choose_face_settings(request: web.Request) -> FaceSettings | None:
    """?mask=, ?faces= (with ?reference=) and ?shape=: None when none is given (the gateway's defaults
    apply)."""
    q = request.query
    if "mask" not in q and "faces" not in q and "shape" not in q:
        return None
    proc = request.app[CONFIG].processing
    keep = proc.mask_regions
    if "mask" in q:
        keep = tuple(r.strip() for r in q["mask"].split(",") if r.strip() and r.strip().lower() != "none")
        bad = [r for r in keep if r not in MASK_REGIONS]
        if bad:
            known = ", ".join((*MASK_REGIONS, "none"))
            raise BadRequest(f"unknown mask region(s) {', '.join(bad)} (known: {known})")
    selector = q.get("faces", proc.face_selector)
    if selector not in FACE_SELECTORS:
        raise BadRequest(f"unknown ?faces={selector} (known: {', '.join(FACE_SELECTORS)})")
    reference = None
    if selector == "reference":
        pipeline = request.app[STATE].pipeline
        if not getattr(pipeline, "supports_reference", False):
            raise Unprocessable(
                "?faces=reference needs the ArcFace embedder (arcface_w600k_r50), which is "
                "not installed here: see `python -m engines.models list`"
            )
        rid = q.get("reference")
        if not rid:
            raise BadRequest("?faces=reference needs ?reference=<source id> (upload it with POST /sources)")
        reference = visible_source(request, rid)
        if reference is None:  # another tenant's image is as unknown as a missing one
            raise NotFound(f"no source {rid!r} for ?reference= (upload one with POST /sources)")
    shape = query_shape(q["shape"]) if "shape" in q else proc.face_shape
    return FaceSettings(keep_regions=keep, selector=selector, reference=reference, shape=shape)


def choose_label(request: web.Request, owner: str | None) -> str | None:
    """The session's visible label: `?label=` (empty: none), else its tenant's, else --disclosure-label."""
    config = request.app[CONFIG]
    if "label" in request.query:
        try:
            return check_label(request.query["label"])
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
    return tenant_label(config.auth.all_tenants, owner) or config.sessions.marking.label


def query_shape(value: str) -> float:
    """?shape=0..1 as a number, or a 400."""
    try:
        return check_shape(float(value))
    except ValueError:
        raise BadRequest(
            f"?shape must be a number in 0..1 (the source's face shape), got {value!r}"
        ) from None


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
    processors = choose_processors(request.query.get("processors"), config.processing.processors)
    source = choose_source(request)
    owner = principal_of(request).tenant
    face_settings = choose_face_settings(request)
    legacy_dtls = choose_dtls(request)
    egress_target = await egress.requested_target(request)
    label = choose_label(request, owner)
    try:
        session, answer = await sessions_of(request.app).create(
            offer,
            source=source,
            processors=processors,
            owner=owner,
            owner_limit=tenant_limit(config.auth.all_tenants, owner),
            face_settings=face_settings,
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
