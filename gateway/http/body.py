"""Reading a request body with a size cap and a deadline.

The header-read timeout (gateway.http.access_log.runner_options) does not cover the body: a client that
sends its headers and then dribbles the body would hold a handler forever. Every body is read here, whole
(a single `content.read(n)` may return only the first chunk), within `body_timeout_s`, and refused past
`limit` bytes without reading the rest.
"""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from gateway.errors import BadRequest, GatewayError, PayloadTooLarge, UnsupportedMediaType


class RequestTimeout(GatewayError):
    status = 408


async def read_body(request: web.Request, limit: int, timeout_s: float, too_large: GatewayError) -> bytes:
    if request.content_length is not None and request.content_length > limit:
        raise too_large

    async def read() -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = await request.content.read(64 * 1024)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)

    try:
        return await asyncio.wait_for(read(), timeout_s)
    except TimeoutError:
        raise RequestTimeout(f"request body not received within {timeout_s:g} s") from None


MAX_JSON_BYTES = 16 * 1024  # control and egress requests: a few keys
JSON_TYPE = "application/json"


async def read_json_body(request: web.Request, timeout_s: float, limit: int = MAX_JSON_BYTES) -> bytes:
    """The raw body when it is a JSON object (or empty); anything else is a one-line 400 (413 past `limit`,
    415 for a body that is not sent as JSON: a cross-site page may POST text/plain or a form without a CORS
    preflight, never application/json).
    The front process forwards these bytes; the media handler parses them (`read_json_object`)."""
    raw = await read_body(request, limit, timeout_s, PayloadTooLarge(f"JSON body over {limit} bytes"))
    if raw.strip() and not is_json_type(request.content_type):
        raise UnsupportedMediaType(
            f"Content-Type must be {JSON_TYPE} (got {request.content_type[:80]}): a body a page could send "
            "without asking (text/plain, a form) is not taken"
        )
    _parse_object(raw)
    return raw


def is_json_type(content_type: str) -> bool:
    """application/json, or a +json type (application/merge-patch+json)."""
    kind = content_type.lower()
    return kind == JSON_TYPE or (kind.startswith("application/") and kind.endswith("+json"))


async def read_json_object(
    request: web.Request, timeout_s: float, limit: int = MAX_JSON_BYTES
) -> dict[str, object]:
    """A JSON object body (an empty body is `{}`); anything else is a one-line 4xx."""
    return _parse_object(await read_json_body(request, timeout_s, limit))


def _parse_object(raw: bytes) -> dict[str, object]:
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    return body
