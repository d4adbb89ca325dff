"""The front's per-route refusals: what a request body must be before it is forwarded (gateway.front).

Each check returns the body to forward (already read, within its limit and deadline) or raises the
GatewayError the media handler would have raised for the same fault. Routes without a check forward no
body: none of the media's other handlers reads one, so a client's megabytes end here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway.errors import PreconditionRequired, UnsupportedMediaType
from gateway.front.config import FrontConfig
from gateway.http.body import read_json_body
from gateway.http.request_checks import (
    TRICKLE_TYPE,
    check_image_size,
    read_checked_offer,
    read_image_body,
    read_trickle_fragment,
)

Check = Callable[[web.Request, FrontConfig], Awaitable[bytes]]


async def no_body(request: web.Request, config: FrontConfig) -> bytes:
    return b""


async def whip_offer(request: web.Request, config: FrontConfig) -> bytes:
    return await _offer(request, config, need_send=True)


async def whep_offer(request: web.Request, config: FrontConfig) -> bytes:
    return await _offer(request, config, need_send=False)


async def _offer(request: web.Request, config: FrontConfig, *, need_send: bool) -> bytes:
    text = await read_checked_offer(request, config.max_sdp_bytes, config.body_timeout_s, need_send=need_send)
    return text.encode("utf-8")


async def trickle(request: web.Request, config: FrontConfig) -> bytes:
    """As the media handler checks it (the ETag itself needs the session: the media process checks that)."""
    if request.content_type != TRICKLE_TYPE:
        raise UnsupportedMediaType(f"Content-Type must be {TRICKLE_TYPE}")
    if request.headers.get("If-Match") is None:
        raise PreconditionRequired("If-Match with the session's ETag is required")
    body, _ = await read_trickle_fragment(request, config.max_sdp_bytes, config.body_timeout_s)
    return body


async def source_image(request: web.Request, config: FrontConfig) -> bytes:
    body = await read_image_body(request, config.max_body_bytes, config.body_timeout_s)
    check_image_size(body, config.max_pixels)
    return body


async def json_object(request: web.Request, config: FrontConfig) -> bytes:
    """Live control and egress requests: a small JSON object (its values are the media process's to check)."""
    return await read_json_body(request, config.body_timeout_s)


CHECKS: dict[tuple[str, str], Check] = {
    ("POST", "/whip"): whip_offer,
    ("POST", "/whep/{session_id}"): whep_offer,
    ("PATCH", "/whip/{session_id}"): trickle,
    ("POST", "/sources"): source_image,
    ("PATCH", "/sessions/{session_id}"): json_object,
    ("POST", "/sessions/{session_id}/egress"): json_object,
}


def check_for(method: str, path: str) -> Check:
    return CHECKS.get((method, path), no_body)
