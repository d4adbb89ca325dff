"""The monitoring routes on a listener of their own (--metrics-address, --metrics-port).

Prometheus scrapes /metrics from inside the cluster; the public port faces publishers. With a metrics port
the chosen groups (`metrics`: /metrics; `api`: /api/stats, /api/stream; `dashboard`: /dashboard, its script
and /) are served there and answer 404 on the public port, and the metrics port serves nothing else but
/healthz and /readyz. Both listeners belong to the one app: a middleware tells them apart by the local
address a request arrived on (the front process, when there is one, is never given the moved routes).
LiveKit (`prometheus_port`), MediaMTX (`metricsAddress`) and Janus (its admin API's own port) do the same.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Middleware

GROUPS: dict[str, tuple[str, ...]] = {
    "metrics": ("/metrics",),
    "api": ("/api/stats", "/api/stream"),
    "dashboard": ("/dashboard", "/dashboard.js", "/"),
}
ALWAYS = ("/healthz", "/readyz")  # a probe may use either port
# (address, port) pairs the metrics listener is bound to: filled in when it starts (gateway.listening)
BOUND = web.AppKey("livefuse_metrics_bound", set[tuple[str, int]])
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class MetricsListenerConfig:
    port: int | None = None  # None: the monitoring routes stay on the public port
    address: str = "127.0.0.1"
    groups: tuple[str, ...] = ("metrics",)  # what moves there: metrics, api, dashboard
    per_session: bool = False  # /metrics with a `session` label per open session (unbounded: opt-in)

    def __post_init__(self) -> None:
        if self.port is not None and not 0 <= self.port <= 65535:
            raise ValueError(f"metrics port must be 0..65535, got {self.port}")
        unknown = [g for g in self.groups if g not in GROUPS]
        if unknown or not self.groups:
            raise ValueError(
                f"--metrics-routes takes {', '.join(GROUPS)} (comma-separated), got {','.join(self.groups)}"
            )

    @property
    def paths(self) -> frozenset[str]:
        """The paths served on the metrics listener only (none when there is none)."""
        if self.port is None:
            return frozenset()
        return frozenset(p for g in self.groups for p in GROUPS[g])


def public_routes(
    config: MetricsListenerConfig, routes: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, str], ...]:
    """The (method, path) routes the public port may answer: all but those moved to the metrics port."""
    moved = config.paths
    return tuple(r for r in routes if r[1] not in moved)


def _local(request: web.Request) -> tuple[str, int] | None:
    sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        return str(ipaddress.ip_address(sockname[0].split("%")[0])), int(sockname[1])
    return None  # a Unix socket: the front process forwarding the public port


def _arrived_on(local: tuple[str, int] | None, bound: set[tuple[str, int]]) -> bool:
    """Whether a request's local (address, port) is one of `bound`; a wildcard bind matches any address."""
    if local is None:
        return False
    address, port = local
    return any(p == port and (a == address or ipaddress.ip_address(a).is_unspecified) for a, p in bound)


def bound_addresses(addresses: list[object]) -> set[tuple[str, int]]:
    """aiohttp's `runner.addresses` (TCP socknames) as (address, port) pairs."""
    out = set()
    for sockname in addresses:
        if isinstance(sockname, tuple) and len(sockname) >= 2:
            out.add((str(ipaddress.ip_address(str(sockname[0]).split("%")[0])), int(sockname[1])))
    return out


def middleware(config: MetricsListenerConfig) -> Middleware:
    moved = config.paths

    @web.middleware
    async def by_listener(request: web.Request, handler: Handler) -> web.StreamResponse:
        if moved:
            on_metrics = _arrived_on(_local(request), request.app.get(BOUND, set()))
            if on_metrics != (request.path in moved) and request.path not in ALWAYS:
                raise web.HTTPNotFound(text="not on this port")
        return await handler(request)

    return by_listener
