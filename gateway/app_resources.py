"""The gateway's resources, each with its start and its stop in one place, for `create_app` to list in order.

Why one function per resource: the order things stop in is the reverse of the order they start in, and that
holds only if nobody writes the stop sequence by hand. The app's own resources are aiohttp `cleanup_ctx`
entries (`lifetime`); the media path (decoders, encoders, the face pipeline, the upload pool, the scheduler,
the sessions, the remote-engine watch) starts in a background task, so that liveness answers while models
load, and each of its parts is one entry on an `AsyncExitStack` that unwinds when the app stops (`MediaPath`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import cv2
from aiohttp import web

from engines.frames import FrameItem, FrameOutput
from gateway.config import GatewayConfig
from gateway.control import Governor
from gateway.engine_watch import EngineWatch
from gateway.executor_threads import default_workers, start_all_threads
from gateway.http import sources
from gateway.http.keys import STATE, PipelineLike
from gateway.marking.config import MarkingConfig
from gateway.monitoring.ports import GatewayMonitor
from gateway.scheduler import FrameScheduler
from gateway.session import SessionManager

if TYPE_CHECKING:
    from gateway.monitoring.monitor import MonitorConfig
    from gateway.webrtc.codecs.hw_encode import HardwareH264

logger = logging.getLogger(__name__)

ProcessFn = Callable[[list[FrameItem]], list[FrameOutput]]
CleanupCtx = Callable[[web.Application], AsyncIterator[None]]


class Startable(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...


def lifetime(resource: Startable) -> CleanupCtx:
    """A `cleanup_ctx` entry: `resource` starts with the app and closes when it stops."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        await resource.start()
        try:
            yield
        finally:
            await resource.close()

    return ctx


def _monitor_config(config: GatewayConfig) -> MonitorConfig:
    from gateway.monitoring.monitor import MonitorConfig

    return config.monitor or MonitorConfig(budget_ms=config.scheduler.budget_ms)


def default_governor(config: GatewayConfig) -> Governor:
    """The sessions' governor; the default monitor feeds it (an injected test monitor leaves it at full
    quality, admitting)."""
    monitor_config = _monitor_config(config)
    return Governor(monitor_config.degradation, monitor_config.budget_ms, monitor_config.capacity_target)


def default_monitor(config: GatewayConfig, governor: Governor) -> GatewayMonitor:
    from gateway.monitoring.monitor import Monitor

    return Monitor(_monitor_config(config), governor=governor)


def default_pipeline(config: GatewayConfig) -> PipelineLike:
    """The real pipeline, from the config the gateway holds. Sessions' default "none" still loads the
    swapper: a session may ask for it (?processors=face_swapper)."""
    from engines.frames import STAGE_SWAP
    from engines.models.store import ModelStore, default_model_dir
    from engines.pipeline import Pipeline

    pipeline_config = config.pipeline
    if not pipeline_config.processors:
        pipeline_config = replace(pipeline_config, processors=(STAGE_SWAP,))
    store = ModelStore(config.model_dir or default_model_dir({}))  # the CLI resolves env and flags
    return Pipeline.from_config(pipeline_config, store)


def _start_decoders(app: web.Application, monitor: GatewayMonitor, enabled: bool) -> Callable[[], None]:
    """NVDEC where the GPU has it and `enabled` (webrtc.codecs.hw_decode): an event and /api/stats "decoder"
    say which decoder runs per codec. Returns the undo."""
    from gateway.monitoring.routes import add_section
    from gateway.webrtc.codecs import hw_decode
    from gateway.webrtc.install import install_decoders

    choice = hw_decode.detect(enabled)
    undo = install_decoders(choice, lambda msg: monitor.event(hw_decode.EVENT, msg))
    monitor.event(hw_decode.EVENT, f"video decode: {choice.summary()}", **choice.to_dict())
    add_section(app, "decoder", choice.to_dict)
    return undo


def _start_marking(app: web.Application, monitor: GatewayMonitor, marking: MarkingConfig) -> None:
    """Say how the output is marked, at every start (a warning when it is not: the law asks for the mark),
    and show it in /api/stats "marking", with each session's (ahead of the exposure view, which hides the
    sessions a caller does not own)."""
    from gateway.monitoring.routes import STATS_VIEWS

    if marking.enabled:
        summary = "every output frame carries the invisible mark" + (
            f" with the keyed payload (key id {marking.key_id})"
            if marking.key is not None
            else " (public layer)"
        )
        logger.info("marking: %s", summary)
    else:
        summary = "--no-mark: output frames are NOT marked as synthetic"
        logger.warning("marking: %s", summary)
    monitor.event("marking", summary, enabled=marking.enabled, key_id=marking.key_id)

    def section() -> dict[str, object]:
        manager = app[STATE].sessions
        sessions = list(manager.sessions.values()) if manager is not None else []
        return {
            "enabled": marking.enabled,
            "key_id": marking.key_id,
            "header": marking.header_value(),
            "label": marking.label,
            "sessions": [{"session": s.id, **s.marking_stats()} for s in sessions],
        }

    def view(request: web.Request, stats: dict[str, object]) -> dict[str, object]:
        stats["marking"] = section()
        return stats

    if STATS_VIEWS in app:
        app[STATS_VIEWS].insert(0, view)


def _start_encoders(app: web.Application, monitor: GatewayMonitor, enabled: bool) -> HardwareH264:
    """NVENC for H.264 where the GPU has it and `enabled` (webrtc.codecs.hw_encode): an event and /api/stats
    "encoder" say which encoder runs; every stream falls back to software on its own if NVENC fails it."""
    from gateway.monitoring.routes import add_section
    from gateway.webrtc.codecs import hw_encode

    choice = hw_encode.detect(enabled)
    monitor.event(hw_encode.EVENT, f"video encode: {choice.summary()}", **choice.to_dict())
    add_section(app, "encoder", choice.to_dict)
    return hw_encode.HardwareH264(choice, lambda msg: monitor.event(hw_encode.EVENT, msg))


async def _read_default_source(app: web.Application, path: Path) -> str:
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError(f"default source {path} is not a readable image")
    face = await sources.add_source(app, cv2.cvtColor(image, cv2.COLOR_BGR2RGB), "default")
    return face.id


@dataclass(frozen=True)
class MediaPath:
    """The media path as one `cleanup_ctx` entry; `pipeline` and `process` are injected by tests (a fake
    pipeline, or a process fn that replaces `pipeline.process` in the scheduler, e.g. a deliberately slow
    one). A failed start-up is kept in `AppState.startup_error` (one line) for the CLI to report."""

    config: GatewayConfig
    monitor: GatewayMonitor
    governor: Governor
    pipeline: PipelineLike | None = None
    process: ProcessFn | None = None

    async def ctx(self, app: web.Application) -> AsyncIterator[None]:
        state = app[STATE]
        stack = contextlib.AsyncExitStack()
        task = asyncio.get_running_loop().create_task(self._startup(app, stack), name="gateway-startup")
        try:
            yield
        finally:
            state.ready = False
            # A model load runs in a thread that cannot be interrupted: let start-up finish, then undo it.
            await asyncio.shield(task)
            await stack.aclose()

    async def _startup(self, app: web.Application, stack: contextlib.AsyncExitStack) -> None:
        state = app[STATE]
        try:
            await self._start(app, stack)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            state.startup_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            logger.error("start-up failed: %s", state.startup_error)
        finally:
            state.started.set()

    async def _start(self, app: web.Application, stack: contextlib.AsyncExitStack) -> None:
        """Each part pushes its own undo as it starts: they run in reverse (the watch, the sessions, the
        scheduler, the upload pool, the pipeline, the decoders)."""
        config, monitor, state = self.config, self.monitor, app[STATE]
        loop = asyncio.get_running_loop()
        hardware = config.sessions.hardware_codecs
        stack.callback(_start_decoders(app, monitor, hardware))
        hardware_h264 = _start_encoders(app, monitor, hardware)
        _start_marking(app, monitor, config.sessions.marking)
        pipeline = self.pipeline
        if pipeline is None:
            pipeline = await loop.run_in_executor(None, default_pipeline, config)
        stack.push_async_callback(_close_in_thread, pipeline)
        state.pipeline = pipeline
        stack.callback(state.background.close)  # uploads run pipeline.prepare_source on it: closed first
        await loop.run_in_executor(None, pipeline.warmup)
        await start_all_threads(None, default_workers())  # frames convert and encode there
        if config.sessions.default_source is not None:
            state.default_source_id = await _read_default_source(app, config.sessions.default_source)
        scheduler = FrameScheduler(self.process or pipeline.process, config.scheduler)
        stack.push_async_callback(scheduler.close)
        await scheduler.start()
        monitor.watch_scheduler(scheduler.stats)
        manager = SessionManager(
            config.sessions,
            config.ice,
            scheduler,
            monitor,
            self.governor,
            budget_ms=config.scheduler.budget_ms,
            hardware_h264=hardware_h264,
        )
        stack.push_async_callback(manager.close)
        await manager.start()
        if state.shutting_down:
            return
        state.sessions = manager
        state.ready = True
        logger.info("ready: models loaded and warmed")
        if config.pipeline.engine.backend == "triton":
            watch = EngineWatch(pipeline.not_ready_engines, monitor.event)  # /readyz and events follow Triton
            stack.push_async_callback(watch.close)
            state.engine_watch = watch
            watch.start()


async def _close_in_thread(pipeline: PipelineLike) -> None:
    await asyncio.get_running_loop().run_in_executor(None, pipeline.close)
