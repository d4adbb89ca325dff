"""Tenants: who a request is, and what it may touch. Pure functions and frozen data.

A tenant is a name, a bearer token, an optional session limit and an admin flag, read from `--tenants-file`
(the format: README, Tenants and exposure). Sessions and sources belong to the tenant that created them;
another tenant gets 404 (an id is not confirmed to someone who may not use it). WHEP viewing takes the
owner's token, an admin's, or the session's own viewer token, which allows nothing else. `--token` is one
admin tenant named "default". With no token at all every caller is an admin (loopback and tests). The
middleware in gateway.app applies these.
"""

from __future__ import annotations

import hmac
import tomllib
from dataclasses import dataclass
from pathlib import Path

from gateway.marking.config import check_label

ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class Tenant:
    name: str
    token: str
    max_sessions: int | None = None
    admin: bool = False
    disclosure_label: str | None = None  # drawn on its sessions' output (gateway.marking.label)

    def __post_init__(self) -> None:
        if not self.name or not self.token:
            raise ValueError("a tenant needs a name and a token")
        if self.max_sessions is not None and self.max_sessions < 1:
            raise ValueError(f"tenant {self.name!r}: max_sessions must be >= 1")


@dataclass(frozen=True)
class Principal:
    """The caller. `tenant` None = anonymous (no or a wrong token)."""

    tenant: str | None
    admin: bool = False
    viewer_of: str | None = None  # a session's viewer token: may view that session only

    @property
    def anonymous(self) -> bool:
        return self.tenant is None and self.viewer_of is None

    def owns(self, owner: str | None) -> bool:
        return self.admin or (self.tenant is not None and self.tenant == owner)


OPEN = Principal(tenant=ANONYMOUS, admin=True)


def load_tenants(path: Path) -> tuple[Tenant, ...]:
    """Parse a tenants file; ValueError (one line) when it is malformed."""
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    table = data.get("tenants")
    if not isinstance(table, dict) or not table:
        raise ValueError(f"{path}: no [tenants.NAME] tables")
    tenants = []
    for name, spec in table.items():
        if not isinstance(spec, dict) or not isinstance(spec.get("token"), str):
            raise ValueError(f"{path}: tenant {name!r} needs a token string")
        unknown = set(spec) - {"token", "max_sessions", "admin", "disclosure_label"}
        if unknown:
            raise ValueError(f"{path}: tenant {name!r}: unknown key(s) {', '.join(sorted(unknown))}")
        limit = spec.get("max_sessions")
        if len(spec["token"]) < 16:
            raise ValueError(f"{path}: tenant {name!r}: the token must be at least 16 characters")
        label = spec.get("disclosure_label")
        try:
            label = check_label(label if label is None else str(label))
        except ValueError as exc:
            raise ValueError(f"{path}: tenant {name!r}: {exc}") from None
        tenants.append(
            Tenant(
                name, spec["token"], int(limit) if limit is not None else None, bool(spec.get("admin")), label
            )
        )
    tokens = [t.token for t in tenants]
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"{path}: two tenants share a token")
    return tuple(tenants)


def same_secret(offered: str, secret: str) -> bool:
    """Constant-time compare; a header that is not valid UTF-8 (surrogates from aiohttp) is just wrong."""
    try:
        raw = offered.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(raw, secret.encode("utf-8"))


def find_tenant(tenants: tuple[Tenant, ...], offered: str | None) -> Tenant | None:
    if offered is None:
        return None
    found = None
    for tenant in tenants:  # compare with every one: the time taken does not say which matched
        if same_secret(offered, tenant.token):
            found = tenant
    return found


def tenant_label(tenants: tuple[Tenant, ...], name: str | None) -> str | None:
    return next((t.disclosure_label for t in tenants if t.name == name), None)


def tenant_limit(tenants: tuple[Tenant, ...], name: str | None) -> int | None:
    return next((t.max_sessions for t in tenants if t.name == name), None)
