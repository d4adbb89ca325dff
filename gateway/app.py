"""The one place the gateway is wired: `create_app(config, *, pipeline=None, monitor=None, process=None)`.

Shared objects live under typed `web.AppKey`s (gateway.http.keys). Start/stop pairs are in `cleanup_ctx`
(monitor, pipeline warm-up, scheduler, sessions); peer connections are closed in `on_shutdown`, which also
flips the app to "refusing new sessions" first. One middleware maps `gateway.errors` (and aiohttp's own HTTP
exceptions) to one-line text responses and checks the bearer token; nothing escapes as a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import cv2
from aiohttp import web

from engines.frames import FrameItem, FrameOutput
from gateway.auth import is_authorized
from gateway.config import GatewayConfig
from gateway.errors import GatewayError, Unauthorized, Unavailable
from gateway.http import health, sessions, sources, whep, whip
from gateway.http.keys import CONFIG, MONITOR, PIPELINE, SESSIONS, STATE, AppState, PipelineLike
from gateway.scheduler import FrameScheduler
from gateway.sessions import MonitorLike, SessionManager

logger = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MUTATING_WHILE_SHUTTING_DOWN = frozenset({"POST", "PATCH", "PUT"})


def _text(status: int, reason: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, text=reason.splitlines()[0] + "\n" if reason else "\n", headers=headers or {}
    )


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Auth, shutdown refusal and the ONE mapping from errors to HTTP status."""
    try:
        config = request.app[CONFIG]
        if not is_authorized(config.auth, request.method, request.path, request.headers, request.query):
            request.app[MONITOR].record_reject("auth")
            raise Unauthorized()
        if request.app[STATE].shutting_down and request.method in MUTATING_WHILE_SHUTTING_DOWN:
            raise Unavailable("gateway is shutting down", retry_after_s=30)
        return await handler(request)
    except GatewayError as exc:
        if exc.status == 400:
            request.app[MONITOR].record_reject("bad_request")
        return _text(exc.status, exc.reason, exc.headers)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        reason = exc.reason if exc.status != 413 else "request body too large"
        return _text(
            exc.status, reason, {k: v for k, v in exc.headers.items() if k in ("Allow", "Retry-After")}
        )
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except Exception:
        logger.exception("unhandled error on %s %s", request.method, request.path)
        return _text(500, "internal error")


def _default_pipeline(config: GatewayConfig) -> PipelineLike:
    from engines.factory import EngineConfig
    from engines.models.store import ModelStore, default_model_dir
    from engines.pipeline import Pipeline, PipelineConfig

    proc = config.processing
    kwargs: dict[str, Any] = {}
    if proc.swapper:
        kwargs["swapper"] = proc.swapper
    if proc.enhancer:
        kwargs["enhancer"] = proc.enhancer
    pipeline_config = PipelineConfig(
        processors=proc.processors,
        detector_size=proc.detector_size,
        engine=EngineConfig(backend=proc.engine, providers=proc.providers, max_batch=proc.max_batch),
        **kwargs,
    )
    store = ModelStore(proc.model_dir or default_model_dir(os.environ))
    return Pipeline.from_config(pipeline_config, store)


def _default_monitor(config: GatewayConfig) -> MonitorLike:
    from gateway.monitoring.monitor import Monitor, MonitorConfig

    monitor_config = config.monitor or MonitorConfig(budget_ms=config.scheduler.budget_ms)
    return Monitor(monitor_config)


def create_app(
    config: GatewayConfig,
    *,
    pipeline: PipelineLike | None = None,
    monitor: MonitorLike | None = None,
    process: Callable[[list[FrameItem]], list[FrameOutput]] | None = None,
) -> web.Application:
    """Build the gateway app. Tests may inject a pipeline, a monitor, or a process fn (replaces
    `pipeline.process` in the scheduler, e.g. a deliberately slow fake)."""
    app = web.Application(middlewares=[error_middleware], client_max_size=config.max_body_bytes)
    state = AppState()
    app[CONFIG] = config
    app[STATE] = state
    the_monitor = monitor if monitor is not None else _default_monitor(config)
    app[MONITOR] = the_monitor
    the_pipeline = pipeline if pipeline is not None else None

    async def pipeline_ctx(app: web.Application) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        nonlocal the_pipeline
        if the_pipeline is None:
            the_pipeline = await loop.run_in_executor(None, _default_pipeline, config)
        app[PIPELINE] = the_pipeline
        await loop.run_in_executor(None, the_pipeline.warmup)
        if config.sessions.default_source is not None:
            image = cv2.imread(str(config.sessions.default_source), cv2.IMREAD_COLOR)
            if image is None:
                raise ValueError(f"default source {config.sessions.default_source} is not a readable image")
            face = await sources.add_source(app, cv2.cvtColor(image, cv2.COLOR_BGR2RGB), "default")
            state.default_source_id = face.id
        try:
            yield
        finally:
            await loop.run_in_executor(None, the_pipeline.close)

    async def monitor_ctx(app: web.Application) -> AsyncIterator[None]:
        starter = getattr(the_monitor, "start", None)
        if starter is not None:
            await starter()
        try:
            yield
        finally:
            closer = getattr(the_monitor, "close", None)
            if closer is not None:
                await closer()

    async def media_ctx(app: web.Application) -> AsyncIterator[None]:
        assert the_pipeline is not None
        scheduler = FrameScheduler(process or the_pipeline.process, config.scheduler)
        await scheduler.start()
        manager = SessionManager(
            config.sessions, config.ice, scheduler, the_monitor, budget_ms=config.scheduler.budget_ms
        )
        app[SESSIONS] = manager
        await manager.start()
        state.extra["scheduler"] = scheduler
        state.ready = True
        try:
            yield
        finally:
            state.ready = False
            await manager.close()
            await scheduler.close()

    async def on_shutdown(app: web.Application) -> None:
        state.shutting_down = True
        if SESSIONS in app:
            await app[SESSIONS].close()  # refuse new sessions, close every peer connection

    app.cleanup_ctx.extend([monitor_ctx, pipeline_ctx, media_ctx])
    app.on_shutdown.append(on_shutdown)

    health.add_routes(app)
    whip.add_routes(app)
    whep.add_routes(app)
    sources.add_routes(app)
    sessions.add_routes(app)
    app.router.add_get("/demo", _demo)
    if monitor is None or hasattr(the_monitor, "snapshot_dict"):
        try:
            from gateway.monitoring.routes import setup_monitoring_routes

            setup_monitoring_routes(app, the_monitor)  # type: ignore[arg-type]
        except ImportError:  # pragma: no cover - monitoring is part of the package
            logger.warning("monitoring routes unavailable")
    return app


async def _demo(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC_DIR / "demo.html")
