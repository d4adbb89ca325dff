"""The one place the gateway is wired: `create_app(config, *, pipeline=None, monitor=None, process=None)`.

Shared objects live under typed `web.AppKey`s (gateway.http.keys). Start/stop pairs are in `cleanup_ctx`
(monitor; then pipeline load and warm-up, scheduler, sessions in a background task, so liveness answers
while models load); peer connections are closed in `on_shutdown`, which also
flips the app to "refusing new sessions" first. One middleware maps `gateway.errors` (and aiohttp's own HTTP
exceptions) to one-line text responses and checks the bearer token; nothing escapes as a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2
from aiohttp import web

from engines.frames import FrameItem, FrameOutput
from gateway.auth import identify, is_authorized
from gateway.config import GatewayConfig
from gateway.control import Governor
from gateway.engine_watch import EngineWatch
from gateway.errors import Unauthorized, Unavailable
from gateway.http import control, cors, exposure, health, metrics_listener, sessions, sources, whep, whip
from gateway.http import egress as egress_routes
from gateway.http.keys import CONFIG, MONITOR, PRINCIPAL, STATE, AppState, PipelineLike
from gateway.http.rate_limit import TokenBuckets, rate_limit_middleware
from gateway.http.replies import replied
from gateway.http.request_checks import MUTATING_WHILE_SHUTTING_DOWN
from gateway.scheduler import FrameScheduler
from gateway.session import MonitorLike, SessionManager
from gateway.webhooks import wiring as webhooks

if TYPE_CHECKING:
    from gateway.monitoring.monitor import MonitorConfig
    from gateway.webrtc.codecs.hw_encode import HardwareH264

logger = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
NEEDS_MEDIA = ("/whip", "/whep", "/sessions", "/sources")  # endpoints that need the pipeline and sessions


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Auth, shutdown refusal and the ONE mapping from errors to HTTP status (gateway.http.replies)."""

    async def checked() -> web.StreamResponse:
        config = request.app[CONFIG]
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


def _default_pipeline(config: GatewayConfig) -> PipelineLike:
    from engines.factory import EngineConfig
    from engines.models.store import ModelStore, default_model_dir
    from engines.pipeline import Pipeline, PipelineConfig
    from engines.processors.masks import BoxMaskConfig

    proc = config.processing
    kwargs: dict[str, Any] = {}
    if proc.swapper:
        kwargs["swapper"] = proc.swapper
    if proc.enhancer:
        kwargs["enhancer"] = proc.enhancer
    pipeline_config = PipelineConfig(
        # default "none" still loads the swapper: a session may ask for it with ?processors=face_swapper
        processors=proc.processors or ("face_swapper",),
        detector_size=proc.detector_size,
        keep_regions=proc.mask_regions,
        face_selector=proc.face_selector,
        shape=proc.face_shape,
        poisson=proc.poisson_blend,
        mask=BoxMaskConfig(blur=proc.mask_blur, padding=proc.mask_padding),
        engine=EngineConfig(
            backend=proc.engine,
            providers=proc.providers,
            max_batch=proc.max_batch,
            device_id=proc.device_id,
            fp16=proc.fp16,
            trt_cache_dir=proc.trt_cache_dir,
            intra_op_threads=proc.intra_op_threads,
            contexts=proc.contexts,
            triton=proc.triton,
        ),
        **kwargs,
    )
    store = ModelStore(proc.model_dir or default_model_dir({}))  # the CLI resolves env and flags
    return Pipeline.from_config(pipeline_config, store)


def _monitor_config(config: GatewayConfig) -> MonitorConfig:
    from gateway.monitoring.monitor import MonitorConfig

    return config.monitor or MonitorConfig(budget_ms=config.scheduler.budget_ms)


def _governor(config: GatewayConfig) -> Governor:
    """The sessions' governor; the default monitor feeds it (an injected test monitor leaves it at full
    quality, admitting)."""
    monitor_config = _monitor_config(config)
    return Governor(monitor_config.degradation, monitor_config.budget_ms, monitor_config.capacity_target)


def _default_monitor(config: GatewayConfig, governor: Governor) -> MonitorLike:
    from gateway.monitoring.monitor import Monitor

    return Monitor(_monitor_config(config), governor=governor)


def _start_decoders(app: web.Application, parts: dict[str, Any], monitor: MonitorLike, enabled: bool) -> None:
    """NVDEC where the GPU has it and `enabled` (webrtc.codecs.hw_decode): an event and /api/stats "decoder"
    say which decoder runs per codec."""
    from gateway.monitoring.routes import add_section
    from gateway.webrtc.codecs import hw_decode
    from gateway.webrtc.install import install_decoders

    choice = hw_decode.detect(enabled)
    parts["undo_decoders"] = install_decoders(choice, lambda msg: monitor.event(hw_decode.EVENT, msg))
    monitor.event(hw_decode.EVENT, f"video decode: {choice.summary()}", **choice.to_dict())

    add_section(app, "decoder", choice.to_dict)


def _start_encoders(app: web.Application, monitor: MonitorLike, enabled: bool) -> HardwareH264:
    """NVENC for H.264 where the GPU has it and `enabled` (webrtc.codecs.hw_encode): an event and /api/stats
    "encoder" say which encoder runs; every stream falls back to software on its own if NVENC fails it."""
    from gateway.monitoring.routes import add_section
    from gateway.webrtc.codecs import hw_encode

    choice = hw_encode.detect(enabled)
    monitor.event(hw_encode.EVENT, f"video encode: {choice.summary()}", **choice.to_dict())
    add_section(app, "encoder", choice.to_dict)
    return hw_encode.HardwareH264(choice, lambda msg: monitor.event(hw_encode.EVENT, msg))


def create_app(
    config: GatewayConfig,
    *,
    pipeline: PipelineLike | None = None,
    monitor: MonitorLike | None = None,
    process: Callable[[list[FrameItem]], list[FrameOutput]] | None = None,
) -> web.Application:
    """Build the gateway app. Tests may inject a pipeline, a monitor, or a process fn (replaces
    `pipeline.process` in the scheduler, e.g. a deliberately slow fake).

    Models load and warm up in a background task started with the app, so /healthz answers at once and
    /readyz turns 200 when the media path is up; until then the media endpoints answer 503 + Retry-After.
    A failed start-up is kept in `AppState.startup_error` (one line) for the CLI to report.
    """
    limiter = TokenBuckets(config.rate_limit)  # first: a client out of tokens costs nothing further

    def limited() -> None:
        the_monitor.record_reject("rate_limit")

    app = web.Application(
        middlewares=[
            rate_limit_middleware(limiter, limited),
            error_middleware,
            metrics_listener.middleware(config.metrics),  # routes moved to --metrics-port: 404 here
        ],
        client_max_size=config.max_body_bytes,
    )
    app[metrics_listener.BOUND] = set()
    cors.install(app, config.cors, (egress_routes.TOKEN_HEADER,))
    state = AppState(config)
    state.extra["rate_limit"] = limiter
    app[CONFIG] = config
    app[STATE] = state
    governor = _governor(config)
    the_monitor = monitor if monitor is not None else _default_monitor(config, governor)
    app[MONITOR] = the_monitor
    parts: dict[str, Any] = {}

    async def start_media() -> None:
        loop = asyncio.get_running_loop()
        hardware = config.sessions.hardware_codecs
        _start_decoders(app, parts, the_monitor, hardware)
        hardware_h264 = _start_encoders(app, the_monitor, hardware)
        the_pipeline = pipeline
        if the_pipeline is None:
            the_pipeline = await loop.run_in_executor(None, _default_pipeline, config)
        parts["pipeline"] = the_pipeline
        state.pipeline = the_pipeline
        await loop.run_in_executor(None, the_pipeline.warmup)
        if config.sessions.default_source is not None:
            image = cv2.imread(str(config.sessions.default_source), cv2.IMREAD_COLOR)
            if image is None:
                raise ValueError(f"default source {config.sessions.default_source} is not a readable image")
            face = await sources.add_source(app, cv2.cvtColor(image, cv2.COLOR_BGR2RGB), "default")
            state.default_source_id = face.id
        scheduler = FrameScheduler(process or the_pipeline.process, config.scheduler)
        parts["scheduler"] = scheduler
        await scheduler.start()
        watch = getattr(the_monitor, "watch_scheduler", None)
        if watch is not None:
            watch(scheduler.stats)
        manager = SessionManager(
            config.sessions,
            config.ice,
            scheduler,
            the_monitor,
            governor,
            budget_ms=config.scheduler.budget_ms,
            hardware_h264=hardware_h264,
        )
        parts["manager"] = manager
        await manager.start()
        state.extra["scheduler"] = scheduler
        if state.shutting_down:
            return
        state.sessions = manager
        state.ready = True
        logger.info("ready: models loaded and warmed")
        not_ready = getattr(the_pipeline, "not_ready_engines", None)
        if config.processing.engine == "triton" and not_ready is not None:
            watch = EngineWatch(not_ready, the_monitor.event)  # /readyz and events follow Triton
            parts["engine_watch"] = state.extra["engine_watch"] = watch
            watch.start()

    async def startup(app: web.Application) -> None:
        try:
            await start_media()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            state.startup_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            logger.error("start-up failed: %s", state.startup_error)
        finally:
            state.started.set()

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
        task = asyncio.get_running_loop().create_task(startup(app), name="gateway-startup")
        state.extra["startup_task"] = task
        try:
            yield
        finally:
            state.ready = False
            watch = parts.get("engine_watch")
            if watch is not None:
                await watch.close()
            # A model load runs in a thread that cannot be interrupted: let start-up finish, then undo it.
            await asyncio.shield(task)
            manager = parts.get("manager")
            if manager is not None:
                await manager.close()
            scheduler = parts.get("scheduler")
            if scheduler is not None:
                await scheduler.close()
            state.background.close()
            the_pipeline = parts.get("pipeline")
            if the_pipeline is not None:
                await asyncio.get_running_loop().run_in_executor(None, the_pipeline.close)
            undo_decoders = parts.get("undo_decoders")
            if undo_decoders is not None:
                undo_decoders()

    async def on_shutdown(app: web.Application) -> None:
        await begin_shutdown(app)

    app.cleanup_ctx.extend([monitor_ctx, media_ctx])
    app.on_shutdown.append(on_shutdown)

    health.add_routes(app)
    whip.add_routes(app)
    whep.add_routes(app)
    sources.add_routes(app)
    sessions.add_routes(app)
    control.add_routes(app)
    app.router.add_get("/demo", _demo)
    app.router.add_get("/watch", _watch)
    if monitor is None or hasattr(the_monitor, "snapshot_dict"):
        from gateway.monitoring.audio_section import AudioSection
        from gateway.monitoring.container import container_collector
        from gateway.monitoring.routes import (
            EXTRA_COLLECTORS,
            METRICS_VIEWS,
            STATS_VIEWS,
            MetricsView,
            StatsView,
            setup_monitoring_routes,
        )
        from gateway.webrtc.version_check import installed_version

        setup_monitoring_routes(app, the_monitor)  # type: ignore[arg-type]

        def audio_rows() -> list[dict[str, object]]:
            manager = state.sessions
            if manager is None:
                return []
            return [{**s.audio.stats(), "session": s.id} for s in list(manager.sessions.values())]

        audio = AudioSection(audio_rows)  # the relay's totals: /api/stats "audio", livefuse_audio_* families

        def audio_view(request: web.Request, data: dict[str, object]) -> dict[str, object]:
            data[audio.name] = audio.data()
            return data

        views: list[StatsView] = [exposure.stats_view, audio_view]
        app[STATS_VIEWS] = views
        versions = {name: installed_version(name) for name in ("livefuse", "aiortc", "av")}
        app[EXTRA_COLLECTORS] = [audio.collector, container_collector(versions)]
        metrics_views: list[MetricsView] = [exposure.metrics_view]
        if not config.metrics.per_session:  # a `session` label per publisher: opt-in (--metrics-per-session)
            metrics_views.append(exposure.without_sessions)
        app[METRICS_VIEWS] = metrics_views
    egress_routes.install(app, config.egress)
    webhooks.install(app, config.webhooks, the_monitor)
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
