"""Forwarding a checked request to the media process over its Unix socket, and streaming the answer back.

Hop-by-hop headers (RFC 9110 §7.6.1) stay on their own hop; everything else, Authorization included, goes
through unchanged, so the media process authenticates and answers exactly as if it had been asked directly.
The answer is streamed chunk by chunk: /api/stream (server-sent events) never ends while its viewer stays.
The pool's idle connections are dropped before the media side would close them (its keep-alive is longer),
so a request never lands on a connection the other end is closing.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web
from yarl import URL

from gateway.errors import Unavailable

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "expect",
    }
)
IDLE_S = 30.0  # the front's idle keep-alive to the media socket; the media side keeps them MEDIA_IDLE_S
MEDIA_IDLE_S = 75.0


class Upstream:
    """One client session over the media process's Unix socket; `close()` ends it."""

    def __init__(self, socket_path: str) -> None:
        connector = aiohttp.UnixConnector(path=socket_path, limit=0, keepalive_timeout=IDLE_S)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None, connect=5.0),
            auto_decompress=False,
            skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"),
        )

    async def close(self) -> None:
        await self._session.close()

    async def forward(self, request: web.Request, body: bytes) -> web.StreamResponse:
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        url = URL("http://media" + request.raw_path, encoded=True)
        response: web.StreamResponse | None = None
        try:
            async with self._session.request(
                request.method, url, headers=headers, data=body or None, allow_redirects=False
            ) as answer:
                response = web.StreamResponse(status=answer.status, reason=answer.reason)
                for key, value in answer.headers.items():
                    if key.lower() not in HOP_BY_HOP:
                        response.headers.add(key, value)
                if answer.content_length is not None:
                    response.content_length = answer.content_length
                await response.prepare(request)
                if request.method != "HEAD":
                    async for chunk in answer.content.iter_any():
                        await response.write(chunk)
                await response.write_eof()
                return response
        except aiohttp.ClientConnectionError:
            if response is not None and response.prepared:  # cut mid-answer: the client sees it cut too
                response.force_close()
                return response
            raise Unavailable("the media process is not answering", retry_after_s=2) from None
