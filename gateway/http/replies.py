"""The one mapping from an error to what the client reads: a status and a one-line text reason.

Both planes answer through it: the media process's error middleware (gateway.app) and the front process's
(gateway.front.app), so a request refused in front reads exactly as it would have from behind.
"""

from __future__ import annotations

from aiohttp import web

from gateway.errors import GatewayError

PASSED_HEADERS = ("Allow", "Retry-After")  # from aiohttp's own HTTP exceptions (405 Allow, 503 Retry-After)


def text_reply(status: int, reason: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, text=reason.splitlines()[0] + "\n" if reason else "\n", headers=headers or {}
    )


def error_reply(exc: GatewayError | web.HTTPException) -> web.Response:
    """A GatewayError, or one of aiohttp's HTTP exceptions with status >= 400 (404, 405 with Allow, 413)."""
    if isinstance(exc, GatewayError):
        return text_reply(exc.status, exc.reason, exc.headers)
    reason = exc.reason if exc.status != 413 else "request body too large"
    return text_reply(exc.status, reason, {k: v for k, v in exc.headers.items() if k in PASSED_HEADERS})
