"""The WHIP client side of RFC 9725: the HTTP exchange only (the peer connection is `gateway.egress.push`).

POST the SDP offer with `Authorization: Bearer <token>`; the endpoint answers 201 with the SDP answer and
`Location` (the session's resource, resolved against the endpoint URL: it may be relative, and must stay on
the endpoint's origin); DELETE that resource to end. Redirects are never followed: an egress target passed
the allow-list (gateway.egress.destinations) as named, and a 3xx would lead anywhere. ICE servers come as
`Link: <url>; rel="ice-server"` (section 4.6): aiortc cannot change its servers after the offer gathered, so
they are asked for first with OPTIONS (which servers may refuse; then none are used) and the POST's own Link
headers are kept for the next attempt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import aiohttp
from aiortc import RTCIceServer

from gateway.egress.destinations import DestinationRefused, parse, within

SDP_TYPE = "application/sdp"
REFUSAL_CHARS = 80  # of an endpoint's refusal text kept for events and stats
_LINK = re.compile(r"<([^>]*)>\s*((?:;\s*[\w-]+\s*=\s*(?:\"[^\"]*\"|[^;,\s]*)\s*)*)")
_PARAM = re.compile(r";\s*([\w-]+)\s*=\s*(\"[^\"]*\"|[^;,\s]*)")


class WhipRefused(Exception):
    """The endpoint answered, but not 201 (or 201 without an SDP answer or Location)."""

    def __init__(self, status: int, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(f"WHIP endpoint answered {status}: {reason}")
        self.status = status
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class WhipResource:
    location: str  # absolute
    answer_sdp: str
    ice_servers: tuple[RTCIceServer, ...] = ()
    etag: str | None = None


def check_endpoint(url: str) -> str:
    """`url` when it is an absolute http(s) URL; ValueError (one line) otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"egress endpoint must be an absolute http(s) URL, got {url!r}")
    return url


def ice_servers_from_links(values: list[str]) -> tuple[RTCIceServer, ...]:
    """`Link` header values -> ICE servers: only rel="ice-server" links of stun:/turn:/turns: URLs."""
    servers = []
    for value in values:
        for match in _LINK.finditer(value):
            url = match.group(1).strip()
            params = {k.lower(): v.strip('"') for k, v in _PARAM.findall(match.group(2))}
            if params.get("rel") != "ice-server" or not url.startswith(("stun:", "turn:", "turns:")):
                continue
            servers.append(
                RTCIceServer(
                    urls=url,
                    username=params.get("username") or None,
                    credential=params.get("credential") or None,
                )
            )
    return tuple(servers)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").rstrip("."), parts.port or {"http": 80, "https": 443}.get(scheme)


def _headers(token: str | None, **more: str) -> dict[str, str]:
    headers = dict(more)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _retry_after(response: aiohttp.ClientResponse) -> float | None:
    value = response.headers.get("Retry-After", "")
    return float(value) if value.strip().isdigit() else None


async def ice_servers(
    http: aiohttp.ClientSession, url: str, token: str | None, timeout_s: float
) -> tuple[RTCIceServer, ...]:
    """The endpoint's ICE servers from an OPTIONS request; () when it has none or refuses OPTIONS."""
    try:
        async with http.options(
            url,
            headers=_headers(token),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            allow_redirects=False,
        ) as response:
            if response.status >= 300:
                return ()
            return ice_servers_from_links(response.headers.getall("Link", []))
    except (TimeoutError, aiohttp.ClientError):
        return ()


def endpoint_of(url: str) -> str:
    """Scheme, host and port of `url` (what a message may show: paths carry stream keys)."""
    scheme, host, port = _origin(url)
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{port}" if host else "(no host)"


def refusal_text(body: str, reason: str | None) -> str:
    """The endpoint's own words, cut short: its first line, at most REFUSAL_CHARS characters (a refusal may
    echo the URL, and it reaches events and stats)."""
    first = body.strip().splitlines()[0] if body.strip() else reason or ""
    return first if len(first) <= REFUSAL_CHARS else first[: REFUSAL_CHARS - 1] + "…"


def resource_url(endpoint: str, location: str, scope: str) -> str:
    """The session's resource from `Location`, in the form it was judged in: on the endpoint's origin, a
    plain path (gateway.egress.destinations.parse) below `scope` (the allow-list entry's path); else
    ValueError, whose message names no path. The DELETE, sent with the endpoint's token, goes only here."""
    resource = urljoin(endpoint, location)
    if _origin(resource) != _origin(endpoint):
        raise ValueError(f"Location on {endpoint_of(resource)} is not on the endpoint's origin")
    try:
        where = parse(resource)
    except DestinationRefused:
        raise ValueError("Location is not a plain path (encoded slashes, dot segments, ';')") from None
    if not within(scope, where.path):
        raise ValueError("Location is outside the endpoint's path prefix (its --egress-allow entry)")
    return where.url


async def post_offer(
    http: aiohttp.ClientSession,
    url: str,
    token: str | None,
    offer_sdp: str,
    timeout_s: float,
    scope: str = "/",
    headers: dict[str, str] | None = None,
) -> WhipResource:
    """POST the offer (with `headers` beside ours: the stream's disclosure); the resource on 201, else
    `WhipRefused` (network errors raise aiohttp's/timeouts)."""
    async with http.post(
        url,
        data=offer_sdp.encode(),
        headers=_headers(token, **{**(headers or {}), "Content-Type": SDP_TYPE}),
        timeout=aiohttp.ClientTimeout(total=timeout_s),
        allow_redirects=False,
    ) as response:
        body = await response.text(errors="replace")
        if 300 <= response.status < 400:
            to = endpoint_of(urljoin(url, response.headers.get("Location", "")))
            raise WhipRefused(
                response.status, f"redirects are not followed (to {to}): name the endpoint itself"
            )
        if response.status != 201:
            raise WhipRefused(response.status, refusal_text(body, response.reason), _retry_after(response))
        location = response.headers.get("Location")
        if not location:
            raise WhipRefused(response.status, "201 without a Location header")
        if not body.startswith("v=0"):
            raise WhipRefused(response.status, "201 without an SDP answer")
        try:
            resource = resource_url(url, location, scope)
        except ValueError as exc:
            raise WhipRefused(response.status, str(exc)) from None
        return WhipResource(
            location=resource,
            answer_sdp=body,
            ice_servers=ice_servers_from_links(response.headers.getall("Link", [])),
            etag=response.headers.get("ETag"),
        )


async def delete_resource(
    http: aiohttp.ClientSession, location: str, token: str | None, timeout_s: float
) -> int | None:
    """DELETE the session's resource: the status, or None when the endpoint could not be reached."""
    try:
        async with http.delete(
            location,
            headers=_headers(token),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            allow_redirects=False,
        ) as response:
            return response.status
    except (TimeoutError, aiohttp.ClientError):
        return None
