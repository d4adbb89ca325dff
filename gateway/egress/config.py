"""Egress configuration (frozen, built at the edge by gateway.cli)."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from gateway.egress.destinations import DEFAULT_PORTS, AllowList, DestinationRefused
from gateway.egress.policy import RetryConfig
from gateway.egress.whip_client import check_endpoint

SESSION_PLACEHOLDER = "{session}"  # in the default URL: replaced by the session's id


@dataclass(frozen=True)
class EgressConfig:
    # every session pushes here unless it names its own target; "{session}" becomes the session's id
    default_url: str | None = None
    default_token: str | None = None
    # URLs a client may name as its own target (?egress=, POST /sessions/{id}/egress): scheme, host and port
    # exact, path by prefix; "*" = any public destination (gateway.egress.destinations).
    # Empty: per-session targets are refused (the gateway would POST wherever a client asked).
    allowed_prefixes: tuple[str, ...] = ()
    host_addresses: tuple[str, ...] = ()  # ICE host candidates of egress peers; () = aioice's choice
    retry: RetryConfig = field(default_factory=RetryConfig)
    request_timeout_s: float = 10.0
    connect_timeout_s: float = 15.0

    def __post_init__(self) -> None:
        if self.default_url is not None:
            check_endpoint(self.default_url.replace(SESSION_PLACEHOLDER, "session"))
        if self.request_timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ValueError("egress timeouts must be > 0")
        AllowList.parse(self.allowed_prefixes)  # a bad entry: one line at start-up

    @property
    def allow_list(self) -> AllowList:
        return AllowList.parse(self.allowed_prefixes)

    def allows(self, url: str) -> bool:
        """Whether a client may name `url` (gateway.egress.destinations), short of resolving its host."""
        try:
            self.allow_list.check(url)
        except DestinationRefused:
            return False
        return True

    def trusted_origins(self) -> frozenset[tuple[str, int]]:
        """(host, port) of the operator's own --egress-url: its addresses are not the allow-list's
        business."""
        if self.default_url is None:
            return frozenset()
        parts = urlsplit(self.default_url.replace(SESSION_PLACEHOLDER, "session"))
        host = (parts.hostname or "").rstrip(".")
        return frozenset({(host, parts.port or DEFAULT_PORTS.get(parts.scheme, 443))})

    def default_for(self, session_id: str) -> str | None:
        if self.default_url is None:
            return None
        return self.default_url.replace(SESSION_PLACEHOLDER, session_id)
