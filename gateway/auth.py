"""Bearer-token checks: pure functions so the middleware in gateway.app stays a thin adapter.

Mutating requests (anything but GET/HEAD/OPTIONS) always need a token when any is configured; reads need it
only with `protect_reads`. GET also accepts `?token=` because EventSource (the dashboard's SSE) cannot set
headers. Comparison is constant-time. Who the token belongs to (tenants, the single legacy `token` = one
admin tenant) is gateway.tenants' business; `identify` turns a request into a `Principal`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass

from gateway.tenants import OPEN, Principal, Tenant, find_tenant

READ_METHODS = frozenset({"GET", "HEAD"})
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
LEGACY_TENANT = "default"
_HOST_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")


@dataclass(frozen=True)
class AuthConfig:
    token: str | None = None
    protect_reads: bool = False
    tenants: tuple[Tenant, ...] = ()
    # listen beyond loopback without any token (every caller an admin); otherwise that is refused at start
    allow_anonymous: bool = False
    # Host names answered besides the loopback ones when no token is set (`host_allowed`)
    allowed_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = tuple(h.strip().lower().rstrip(".") for h in self.allowed_hosts if h.strip())
        if any(not _HOST_NAME.match(h) for h in names):
            raise ValueError(
                f"--allowed-hosts takes host names (no port, no scheme), got {list(self.allowed_hosts)}"
            )
        object.__setattr__(self, "allowed_hosts", names)

    @property
    def all_tenants(self) -> tuple[Tenant, ...]:
        legacy = (Tenant(LEGACY_TENANT, self.token, admin=True),) if self.token else ()
        return legacy + self.tenants

    @property
    def enabled(self) -> bool:
        return bool(self.token or self.tenants)


def host_allowed(config: AuthConfig, host: str | None) -> bool:
    """Whether a request's `Host` header may reach a gateway with no token. Then every caller is an admin,
    and the listener is on loopback (gateway.exposure_rule): a web page the operator opens could still reach
    it by DNS rebinding (its own name, re-resolved to 127.0.0.1), and its requests carry that name. So only
    loopback names and addresses are answered (`localhost`, 127.0.0.0/8, [::1], with any port), plus
    --allowed-hosts; as Jupyter and Vite do. With a token, or --allow-anonymous, every Host is answered."""
    if config.enabled or config.allow_anonymous or host is None:
        return True  # a request without Host (HTTP/1.0) comes from no browser
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    name = name.rstrip(".")
    if name == "localhost" or name in config.allowed_hosts:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_refusal(host: str) -> str:
    """The one line a refused Host gets (403)."""
    return (
        f"Host {host[:100]!r} is not answered: without a token the gateway answers localhost, 127.0.0.1 and "
        "[::1] only (a DNS-rebinding guard); add names with --allowed-hosts"
    )


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
