"""The HTTP access log, with secrets taken out.

aiohttp's default access line prints the request target with its query, so `GET /api/stream?token=SECRET`
wrote the token to the INFO log (and the dashboard's Referer header carries it too). Values of the query
keys in `SECRET_KEYS` become `REDACTED`, and `?egress=URL` keeps only the URL's scheme, host and port (a WHIP
URL carries its stream key); the line is otherwise aiohttp's usual one.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import unquote, urlsplit

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http_exceptions import HttpProcessingError

SECRET_KEYS = ("token", "access_token", "viewer_token", "egress_token")
_SECRET = re.compile(r"(?i)([?&](?:" + "|".join(SECRET_KEYS) + r")=)[^&#\s]*")


_EGRESS = re.compile(r"(?i)([?&]egress=)([^&#\s]*)")


def _egress_endpoint(match: re.Match[str]) -> str:
    """`?egress=URL` keeps the endpoint's scheme, host and port; its path and query carry stream keys."""
    value = unquote(match.group(2))
    if value.strip().lower() in ("", "none"):
        return match.group(0)
    try:
        parts = urlsplit(value)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return match.group(1) + "REDACTED"
    host = f"[{host}]" if ":" in host else host
    return f"{match.group(1)}{parts.scheme}://{host}{port}/REDACTED"


def redact(target: str) -> str:
    return _EGRESS.sub(_egress_endpoint, _SECRET.sub(r"\1REDACTED", target))


class RedactingAccessLogger(AbstractAccessLogger):
    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        if not self.logger.isEnabledFor(logging.INFO):
            return
        version = request.version
        self.logger.info(
            '%s "%s %s HTTP/%d.%d" %d %d %.3fs "%s" "%s"',
            request.remote or "-",
            request.method,
            redact(request.raw_path),
            version.major,
            version.minor,
            response.status,
            response.body_length,
            time,
            redact(request.headers.get("Referer", "-")),
            request.headers.get("User-Agent", "-"),
        )


def runner_options(header_timeout_s: float) -> dict[str, Any]:
    """AppRunner keyword arguments every server of the gateway uses. `keepalive_timeout` is also how long
    aiohttp lets a connection sit before its first complete request: it is the header-read timeout that
    stops slowloris clients (blank lines or headers dribbled in keep a connection open no longer)."""
    return {"access_log_class": RedactingAccessLogger, "keepalive_timeout": header_timeout_s}


class MalformedRequestFilter(logging.Filter):
    """aiohttp logs every request it cannot parse (a header over 8190 bytes, a negative Content-Length) at
    ERROR with a traceback, after answering it 400. On an internet-facing server that is an attacker's
    lever on the log, not news: such records are dropped (the 400 is still sent)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, HttpProcessingError) and 400 <= (exc.code or 0) < 500)
