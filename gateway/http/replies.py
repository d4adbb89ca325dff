"""The one mapping from an error to what the client reads: a status and a one-line text reason.

Both planes answer through it: the media process's error middleware (gateway.app) and the front process's
(gateway.front.app), so a request refused in front reads exactly as it would have from behind.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway.errors import GatewayError

logger = logging.getLogger(__name__)

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


async def replied(
    request: web.Request,
    call: Callable[[], Awaitable[web.StreamResponse]],
    on_bad_request: Callable[[], None],
) -> web.StreamResponse:
    """`call()`'s response, or its error as the one-line reply (`on_bad_request` counts each 400); anything
    unexpected is logged with its traceback and answered 500 "internal error", never shown to the client."""
    try:
        return await call()
    except GatewayError as exc:
        if exc.status == 400:
            on_bad_request()
        return error_reply(exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_reply(exc)
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except Exception:
        logger.exception("unhandled error on %s %s", request.method, request.path)
        return text_reply(500, "internal error")
