"""The one place the gateway is wired: `create_app(config, *, pipeline=None, monitor=None, process=None)`.

Shared objects live under typed `web.AppKey`s (gateway.http.keys; the mutable bits in the one `AppState`).
Each resource starts and stops in one place (gateway.app_resources), listed in order in `create_app`:
webhooks, the monitor, the media path (pipeline load and warm-up, scheduler, sessions, in a background task,
so liveness answers while models load), egress; they stop in reverse. Peer connections are closed in
`on_shutdown`, which also flips the app to "refusing new sessions" first. One middleware maps
`gateway.errors` (and aiohttp's own HTTP exceptions) to one-line text responses and checks the bearer token;
nothing escapes as a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from gateway.app_resources import (
    MediaPath,
    ProcessFn,
    default_governor,
    default_monitor,
    lifetime,
)
from gateway.auth import host_allowed, host_refusal, identify, is_authorized
from gateway.config import GatewayConfig
from gateway.errors import Forbidden, Unauthorized, Unavailable
from gateway.http import control, cors, health, metrics_listener, sessions, sources, whep, whip
from gateway.http import egress as egress_routes
from gateway.http.keys import CONFIG, MONITOR, PRINCIPAL, STATE, AppState, PipelineLike
from gateway.http.monitoring_routes import monitoring_routes
from gateway.http.rate_limit import TokenBuckets, rate_limit_middleware
from gateway.http.replies import replied
from gateway.http.request_checks import MUTATING_WHILE_SHUTTING_DOWN
from gateway.monitoring.ports import GatewayMonitor
from gateway.webhooks import wiring as webhooks

logger = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
NEEDS_MEDIA = ("/whip", "/whep", "/sessions", "/sources")  # endpoints that need the pipeline and sessions


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Auth, shutdown refusal and the ONE mapping from errors to HTTP status (gateway.http.replies)."""

    async def checked() -> web.StreamResponse:
        config = request.app[CONFIG]
        host = request.headers.get("Host")
        if not host_allowed(config.auth, host):
            request.app[MONITOR].record_reject("bad_request")
            raise Forbidden(host_refusal(host or ""))
        principal = identify(config.auth, request.method, request.headers, request.query)
        if not is_authorized(config.auth, principal, request.method, request.path, request.headers):
            request.app[MONITOR].record_reject("auth")
            raise Unauthorized()
        request[PRINCIPAL] = principal
        state = request.app[STATE]
        if state.shutting_down and request.method in MUTATING_WHILE_SHUTTING_DOWN:
            raise Unavailable("gateway is shutting down", retry_after_s=30)
        starting = not state.ready and not state.shutting_down  # a drain still serves DELETE and reads
        if starting and request.path.startswith(NEEDS_MEDIA) and request.method != "OPTIONS":
            if state.startup_error is not None:
                raise Unavailable(f"gateway failed to start: {state.startup_error}", retry_after_s=60)
            raise Unavailable("gateway is starting (models warming up)", retry_after_s=5)
        return await handler(request)

    return await replied(request, checked, lambda: request.app[MONITOR].record_reject("bad_request"))


def create_app(
    config: GatewayConfig,
    *,
    pipeline: PipelineLike | None = None,
    monitor: GatewayMonitor | None = None,
    process: ProcessFn | None = None,
) -> web.Application:
    """Build the gateway app. Tests may inject a pipeline, a monitor (a `NullMonitor` or one built on it), or
    a process fn (replaces `pipeline.process` in the scheduler, e.g. a deliberately slow fake).

    Models load and warm up in a background task started with the app, so /healthz answers at once and
    /readyz turns 200 when the media path is up; until then the media endpoints answer 503 + Retry-After.
    A failed start-up is kept in `AppState.startup_error` (one line) for the CLI to report.
    """
    governor = default_governor(config)
    the_monitor = monitor if monitor is not None else default_monitor(config, governor)
    app = web.Application(
        middlewares=[
            # first: a client out of tokens costs nothing further
            rate_limit_middleware(
                TokenBuckets(config.rate_limit), lambda: the_monitor.record_reject("rate_limit")
            ),
            error_middleware,
            metrics_listener.middleware(config.metrics),  # routes moved to --metrics-port: 404 here
        ],
        client_max_size=config.max_body_bytes,
    )
    app[metrics_listener.BOUND] = set()
    cors.install(app, config.cors, (egress_routes.TOKEN_HEADER,))
    app[CONFIG] = config
    app[STATE] = AppState(config)
    app[MONITOR] = the_monitor
    for routes in (health, whip, whep, sources, sessions, control):
        routes.add_routes(app)
    app.router.add_get("/demo", _demo)
    app.router.add_get("/watch", _watch)
    app.on_shutdown.append(begin_shutdown)  # before the monitoring routes end their streams
    monitoring_routes(app, config, the_monitor)
    hub = egress_routes.install(app, config.egress)
    hooks = webhooks.install(app, config.webhooks, the_monitor)
    app.cleanup_ctx.extend(
        [
            lifetime(hooks),  # first in, last out: the sessions' last events (session.ended) still go out
            lifetime(the_monitor),
            MediaPath(config, the_monitor, governor, pipeline, process).ctx,
            lifetime(hub),
        ]
    )
    return app


def refuse_new_sessions(app: web.Application) -> None:
    """From now on new sessions get 503 and /readyz 503; live ones carry on."""
    state = app[STATE]
    state.shutting_down = True
    state.ready = False


async def drain_sessions(app: web.Application, grace_s: float, hurry: asyncio.Event) -> int:
    """Refuse new sessions and wait until no session is open, `grace_s` passes or `hurry` is set; returns
    the sessions still open (begin_shutdown then closes them)."""
    refuse_new_sessions(app)
    state = app[STATE]

    def open_sessions() -> int:
        return 0 if state.sessions is None else len(state.sessions.sessions)

    loop = asyncio.get_running_loop()
    end = loop.time() + grace_s
    while open_sessions() and not hurry.is_set() and loop.time() < end:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(hurry.wait(), min(0.25, max(0.0, end - loop.time())))
    return open_sessions()


async def begin_shutdown(app: web.Application) -> None:
    """Refuse new sessions (503, /readyz 503) and close every peer connection. Idempotent; the HTTP server
    keeps answering, so a caller may hold the listener open for a drain period before cleanup."""
    refuse_new_sessions(app)
    state = app[STATE]
    if state.sessions is not None:
        await state.sessions.close()


async def wait_started(app: web.Application, timeout_s: float | None = None) -> None:
    """Wait for the background start-up; raise RuntimeError(one line) when it failed."""
    state = app[STATE]
    await asyncio.wait_for(state.started.wait(), timeout_s)
    if state.startup_error is not None:
        raise RuntimeError(state.startup_error)


async def _demo(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC_DIR / "demo.html")


async def _watch(request: web.Request) -> web.FileResponse:
    """The WHEP player page: /watch?session=ID&token=VIEWER_TOKEN."""
    return web.FileResponse(STATIC_DIR / "watch.html")
