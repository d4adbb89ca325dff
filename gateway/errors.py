"""The gateway's error hierarchy: handlers raise these, ONE middleware (gateway.app) maps them to HTTP.

Each class carries its HTTP status; the message is a one-line reason sent as text/plain. Anything else that
escapes a handler is logged and answered 500 by the same middleware, never with a traceback.
"""

from __future__ import annotations


class GatewayError(Exception):
    status: int = 400
    headers: dict[str, str] = {}

    def __init__(self, reason: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason.splitlines()[0] if reason else self.__class__.__name__)
        self.headers = dict(headers or {})

    @property
    def reason(self) -> str:
        return str(self)


class BadRequest(GatewayError):
    status = 400


class Unauthorized(GatewayError):
    status = 401

    def __init__(self, reason: str = "missing or invalid bearer token") -> None:
        super().__init__(reason, headers={"WWW-Authenticate": 'Bearer realm="livefuse"'})


class NotFound(GatewayError):
    status = 404


class Conflict(GatewayError):
    status = 409


class PayloadTooLarge(GatewayError):
    status = 413


class UnsupportedMediaType(GatewayError):
    status = 415


class PreconditionFailed(GatewayError):
    status = 412


class Unprocessable(GatewayError):
    status = 422


class PreconditionRequired(GatewayError):
    status = 428


class Unavailable(GatewayError):
    """Full or shutting down; Retry-After tells clients when to try again."""

    status = 503

    def __init__(self, reason: str, *, retry_after_s: int = 5) -> None:
        super().__init__(reason, headers={"Retry-After": str(retry_after_s)})


class Forbidden(GatewayError):
    status = 403
