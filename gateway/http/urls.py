"""Where a session's resource lives, as the client must address it: relative, or absolute via --public-url.

Why: behind a load balancer with several gateway replicas, a session lives on the replica that accepted it;
a relative `Location: /whip/<id>` would send the client's PATCH (trickle ICE) and DELETE back through the
balancer to ANY replica, which does not know the session (404). With `--public-url` each replica advertises
its own reachable address (RFC 9725 allows the Location to be any URL), e.g. a per-pod host name. A path
prefix in it (`https://media.example/gw-3`) is for a proxy that routes on it and strips it before the gateway.
"""

from __future__ import annotations

from urllib.parse import urlsplit


def check_public_url(url: str) -> str:
    """The URL without a trailing slash; ValueError (one line) when it is not an absolute http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"public URL must be an absolute http(s) URL without query, got {url!r}")
    return url.rstrip("/")


def resource_url(public_url: str | None, path: str) -> str:
    """`path` (starting with /) as the client should use it."""
    return f"{public_url}{path}" if public_url else path
