"""A per-client-address request rate limit on the HTTP control plane.

The dearest requests (an image without a face, a new peer connection, a body of megabytes read and thrown
away) are well-formed, so only how often one client may ask bounds them. Every request first takes a token
from its address's bucket (`TokenBuckets`, pure: refill `rate_per_s`, hold at most `burst`); without one it
gets 429 with Retry-After before auth, routing or the body. The key is the TCP peer address; X-Forwarded-For
counts only from one of the operator's `--trusted-proxies` (then the rightmost address in it that is not a
trusted proxy is the client). The table is bounded (`max_clients`, least recently seen first).
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Middleware

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class RateLimitConfig:
    rate_per_s: float = 20.0  # sustained requests per second per client address; 0 = no limit
    burst: int = 60  # requests a client may send at once after being idle (a WHIP join, a page load)
    max_clients: int = 10_000  # addresses remembered; the least recently seen is forgotten first
    # addresses or networks of reverse proxies whose X-Forwarded-For names the client; () = trust none
    trusted_proxies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for proxy in self.trusted_proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(f"trusted proxy must be an address or a network, got {proxy!r}") from None
        if self.rate_per_s < 0 or not math.isfinite(self.rate_per_s):
            raise ValueError(f"rate limit must be a finite number >= 0 (0 = off), got {self.rate_per_s}")
        if self.burst < 1 or self.max_clients < 1:
            raise ValueError("rate limit burst and max_clients must be >= 1")

    @property
    def enabled(self) -> bool:
        return self.rate_per_s > 0


@dataclass
class _Bucket:
    tokens: float
    at: float


class TokenBuckets:
    """One token bucket per key. Event-loop only (no locks); `clock` is injectable for tests."""

    def __init__(self, config: RateLimitConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self.limited = 0  # requests refused so far

    def take(self, key: str) -> float:
        """0.0 when `key` may go now (a token is spent), else the seconds until it will have a token."""
        if not self.config.enabled:
            return 0.0
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.config.burst), now)
            while len(self._buckets) > self.config.max_clients:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            elapsed = max(0.0, now - bucket.at)
            bucket.tokens = min(float(self.config.burst), bucket.tokens + elapsed * self.config.rate_per_s)
            bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        self.limited += 1
        return (1.0 - bucket.tokens) / self.config.rate_per_s

    def __len__(self) -> int:
        return len(self._buckets)


def client_key(request: web.Request, trusted: Sequence[IpNetwork] = ()) -> str:
    """The client's address (no port: one host, one bucket): the TCP peer's, or, when the peer is a trusted
    proxy, the rightmost X-Forwarded-For address that is not a trusted proxy."""
    peer = request.remote or "unknown"
    if not trusted or not _is_trusted(peer, trusted):
        return peer
    hops = [h.strip() for v in request.headers.getall("X-Forwarded-For", ()) for h in v.split(",")]
    for hop in reversed([h for h in hops if h]):
        if not _is_trusted(hop, trusted):
            return hop if _is_address(hop) else peer
    return peer


IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def trusted_networks(config: RateLimitConfig) -> tuple[IpNetwork, ...]:
    return tuple(ipaddress.ip_network(p, strict=False) for p in config.trusted_proxies)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _is_trusted(address: str, trusted: Sequence[IpNetwork]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip.version == net.version and ip in net for net in trusted)


def rate_limit_middleware(buckets: TokenBuckets, on_limited: Callable[[], None] | None = None) -> Middleware:
    """The first middleware: 429 + Retry-After (whole seconds, at least 1) when the client has no token."""

    trusted = trusted_networks(buckets.config)

    @web.middleware
    async def rate_limit(request: web.Request, handler: Handler) -> web.StreamResponse:
        wait_s = buckets.take(client_key(request, trusted))
        if wait_s > 0.0:
            if on_limited is not None:
                on_limited()
            response = web.Response(
                status=429,
                text="too many requests from this address\n",
                headers={"Retry-After": str(max(1, math.ceil(wait_s)))},
            )
            if request.body_exists and not request.content.is_eof():
                await _answer_and_close(request, response)
            return response
        return await handler(request)

    return rate_limit


async def _answer_and_close(request: web.Request, response: web.Response) -> None:
    """Send `response` with `Connection: close`, then close the connection without reading the rest of
    the body. Left alone, aiohttp reads and discards an unread body for up to 10 s after the answer (its
    "lingering close"): a client over its rate that sends megabytes would make the gateway read them all.
    The answer is written first; the transport flushes it before it closes."""
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()
