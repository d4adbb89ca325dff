"""Bearer-token checks: pure functions so the middleware in gateway.app stays a thin adapter.

Mutating requests (anything but GET/HEAD/OPTIONS) always need a token when any is configured; reads need it
only with `protect_reads`. GET also accepts `?token=` because EventSource (the dashboard's SSE) cannot set
headers. Comparison is constant-time. Who the token belongs to (tenants, the single legacy `token` = one
admin tenant) is gateway.tenants' business; `identify` turns a request into a `Principal`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.tenants import OPEN, Principal, Tenant, find_tenant

READ_METHODS = frozenset({"GET", "HEAD"})
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
LEGACY_TENANT = "default"


@dataclass(frozen=True)
class AuthConfig:
    token: str | None = None
    protect_reads: bool = False
    tenants: tuple[Tenant, ...] = ()
    # listen beyond loopback without any token (every caller an admin); otherwise that is refused at start
    allow_anonymous: bool = False

    @property
    def all_tenants(self) -> tuple[Tenant, ...]:
        legacy = (Tenant(LEGACY_TENANT, self.token, admin=True),) if self.token else ()
        return legacy + self.tenants

    @property
    def enabled(self) -> bool:
        return bool(self.token or self.tenants)


def bearer_token(headers: Mapping[str, str]) -> str | None:
    value = headers.get("Authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def needs_auth(config: AuthConfig, method: str, path: str) -> bool:
    if not config.enabled or method == "OPTIONS" or path in OPEN_PATHS:
        return False
    if method in READ_METHODS:
        return config.protect_reads
    return True


def identify(
    config: AuthConfig, method: str, headers: Mapping[str, str], query: Mapping[str, str]
) -> Principal:
    """The caller: OPEN (an admin) when no token is configured, else its tenant, else anonymous."""
    if not config.enabled:
        return OPEN
    offered = bearer_token(headers)
    if offered is None and method in READ_METHODS:
        offered = query.get("token")
    tenant = find_tenant(config.all_tenants, offered)
    if tenant is None:
        return Principal(tenant=None)
    return Principal(tenant=tenant.name, admin=tenant.admin)


def is_authorized(
    config: AuthConfig, principal: Principal, method: str, path: str, headers: Mapping[str, str]
) -> bool:
    """`principal` is `identify`'s answer for the same request (computed once, kept by the middleware)."""
    if not needs_auth(config, method, path):
        return True
    if not principal.anonymous:
        return True
    # a WHEP request may carry a session's viewer token instead: its handler checks it against the session
    return path.startswith("/whep/") and bearer_token(headers) is not None
