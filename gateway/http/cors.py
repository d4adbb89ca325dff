"""Cross-origin access to WHIP and WHEP, for the origins the operator names (--cors-origin).

The gateway's own pages (/demo, /watch, /dashboard) are served from its own origin and need no CORS. A web
player or publisher on another origin does: it is named with --cors-origin (an exact origin such as
https://studio.example, repeatable; `*` for any, as a public demo might). Without it no
Access-Control-Allow-Origin is sent, so a page elsewhere cannot drive the gateway with a visitor's browser.
(MediaMTX's webrtcAllowOrigin and Janus's `allow_origin` are the same setting; both default to `*`, which is
the wrong default for an endpoint that takes a bearer token.) Headers are added to every response on the
WHIP/WHEP paths, errors included, so a browser can read why it was refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

PATHS = ("/whip", "/whep")
ANY = "*"
METHODS = "POST, DELETE, PATCH, OPTIONS"
EXPOSED = "Location, ETag, Link, Accept-Patch, Livefuse-Viewer-Token"


@dataclass(frozen=True)
class CorsConfig:
    origins: tuple[str, ...] = ()  # exact origins (scheme://host[:port]) or "*"; () = same origin only

    def __post_init__(self) -> None:
        normal = tuple(o if o == ANY else normal_origin(o) for o in self.origins)
        object.__setattr__(self, "origins", normal)


def normal_origin(origin: str) -> str:
    """`https://Studio.Example/` -> `https://studio.example`: what a browser sends in its Origin header."""
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"a CORS origin is scheme://host[:port] (or *), got {origin!r}")
    if parts.query or parts.fragment or parts.username is not None:
        raise ValueError(f"a CORS origin is scheme://host[:port] (or *), got {origin!r}")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{host}{port}"


def cors_headers(config: CorsConfig, origin: str | None, allow_headers: str) -> dict[str, str]:
    """The headers for a request from `origin` (its Origin header); {} when that origin is not allowed."""
    if origin is None or not config.origins:
        return {}
    if ANY in config.origins:
        allow = ANY
    else:
        try:
            allow = normal_origin(origin)
        except ValueError:
            return {}
        if allow not in config.origins:
            return {}
    return {
        "Access-Control-Allow-Origin": allow,
        "Access-Control-Allow-Methods": METHODS,
        "Access-Control-Allow-Headers": allow_headers,
        "Access-Control-Expose-Headers": EXPOSED,
        "Vary": "Origin",
    }


def install(app: web.Application, config: CorsConfig, request_headers: tuple[str, ...] = ()) -> None:
    """`request_headers`: headers a cross-origin caller may send beyond Authorization, Content-Type and
    If-Match."""
    allow = ", ".join(("Authorization", "Content-Type", "If-Match", *request_headers))

    async def add(request: web.Request, response: web.StreamResponse) -> None:
        if request.path.startswith(PATHS):
            response.headers.update(cors_headers(config, request.headers.get("Origin"), allow))

    app.on_response_prepare.append(add)
