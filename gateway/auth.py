"""Bearer-token checks: pure functions so the middleware in gateway.app stays a thin adapter.

Mutating requests (anything but GET/HEAD/OPTIONS) always need the token when one is configured; reads need it
only with `protect_reads`. GET also accepts `?token=` because EventSource (the dashboard's SSE) cannot set
headers. Comparison is constant-time.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass

READ_METHODS = frozenset({"GET", "HEAD"})
OPEN_PATHS = frozenset({"/healthz", "/readyz"})


@dataclass(frozen=True)
class AuthConfig:
    token: str | None = None
    protect_reads: bool = False


def bearer_token(headers: Mapping[str, str]) -> str | None:
    value = headers.get("Authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def needs_auth(config: AuthConfig, method: str, path: str) -> bool:
    if config.token is None or method == "OPTIONS" or path in OPEN_PATHS:
        return False
    if method in READ_METHODS:
        return config.protect_reads
    return True


def is_authorized(
    config: AuthConfig, method: str, path: str, headers: Mapping[str, str], query: Mapping[str, str]
) -> bool:
    if not needs_auth(config, method, path):
        return True
    assert config.token is not None
    offered = bearer_token(headers)
    if offered is None and method in READ_METHODS:
        offered = query.get("token")
    return offered is not None and _same(offered, config.token)


def _same(offered: str, token: str) -> bool:
    """Constant-time compare. aiohttp hands non-UTF-8 header bytes over as lone surrogates, which do not
    encode: such a header is simply a wrong token (401), never an exception (it was a 500)."""
    try:
        raw = offered.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(raw, token.encode("utf-8"))
