"""The front process's aiohttp app: refuse what can be refused, forward the rest (gateway.front).

Middlewares, in order: the per-address rate limit (429 before anything is read), then one that maps every
error to the same one-line reply the media process gives (gateway.http.replies) and checks the token with
the same pure functions (gateway.auth). Routing is the media app's own table (method, path pattern), so an
unknown path is 404 and a wrong method 405 with Allow, here. Each route's check (gateway.front.checks) reads
and validates the body; then `Upstream.forward`. Refusals are counted by reason (`rejects`) for the media
process's monitor, as its own middleware counts them when it runs alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from gateway.auth import host_allowed, host_refusal, identify, is_authorized
from gateway.errors import Forbidden, Unauthorized, Unavailable
from gateway.front.checks import Check, check_for
from gateway.front.config import FrontConfig
from gateway.front.upstream import Upstream
from gateway.http import cors
from gateway.http.rate_limit import TokenBuckets, rate_limit_middleware
from gateway.http.replies import replied
from gateway.http.request_checks import MUTATING_WHILE_SHUTTING_DOWN

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
REJECTS: web.AppKey[Counter[str]] = web.AppKey("front_rejects", Counter)
DRAINING: web.AppKey[list[bool]] = web.AppKey("front_draining", list)  # [True] once the gateway stops
UPSTREAM: web.AppKey[Upstream] = web.AppKey("front_upstream", Upstream)


def create_front_app(config: FrontConfig, media_socket: str) -> web.Application:
    rejects: Counter[str] = Counter()
    draining: list[bool] = []
    limiter = TokenBuckets(config.rate_limit)

    def limited() -> None:
        rejects["rate_limit"] += 1

    @web.middleware
    async def errors_and_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        async def checked() -> web.StreamResponse:
            host = request.headers.get("Host")
            if not host_allowed(config.auth, host):
                rejects["bad_request"] += 1
                raise Forbidden(host_refusal(host or ""))
            principal = identify(config.auth, request.method, request.headers, request.query)
            if not is_authorized(config.auth, principal, request.method, request.path, request.headers):
                rejects["auth"] += 1
                raise Unauthorized()
            if draining and request.method in MUTATING_WHILE_SHUTTING_DOWN:
                raise Unavailable("gateway is shutting down", retry_after_s=30)
            return await handler(request)

        def bad_request() -> None:
            rejects["bad_request"] += 1

        return await replied(request, checked, bad_request)

    app = web.Application(
        middlewares=[rate_limit_middleware(limiter, limited), errors_and_auth],
        client_max_size=config.max_body_bytes,
    )
    app[REJECTS] = rejects
    app[DRAINING] = draining
    cors.install(app, config.cors, config.cors_request_headers)  # the same headers as the media app's

    async def upstream_ctx(app: web.Application) -> AsyncIterator[None]:
        upstream = Upstream(media_socket)
        app[UPSTREAM] = upstream
        try:
            yield
        finally:
            await upstream.close()

    app.cleanup_ctx.append(upstream_ctx)
    for method, path in config.routes:
        app.router.add_route(method, path, _forwarding(check_for(method, path), config))
    return app


def _forwarding(check: Check, config: FrontConfig) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        body = await check(request, config)
        return await request.app[UPSTREAM].forward(request, body)

    return handler
