"""The gateway's life after start-up: serve until SIGINT/SIGTERM, then drain and stop in order.

Beside `listening` (where HTTP is served) and the app's own drain (`drain_sessions`, `begin_shutdown`); the
console script (gateway.cli) calls `serve` once the configuration is known to be good.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from gateway.config import GatewayConfig

log = logging.getLogger("gateway")


async def serve(config: GatewayConfig) -> int:
    """Run until SIGINT/SIGTERM; returns the exit code.

    On a signal: refuse new sessions, give live ones up to `drain_grace_s` to end (a second signal cuts it
    short), close the rest (the HTTP server keeps answering 503 and /readyz 503 for `shutdown_grace_s`),
    then stop listening, drain workers, close models.
    A background start-up failure (a model missing, say) ends the process with code 1 and one log line.
    """
    from gateway.app import begin_shutdown, create_app, drain_sessions
    from gateway.http.keys import STATE
    from gateway.listening import listening, media_config

    app = create_app(media_config(config))
    stop = asyncio.Event()
    hurry = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        (hurry if stop.is_set() else stop).set()

    # before anything listens: a SIGTERM as soon as the front answers is a drain, not the default death
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    # leaving the block stops listening (the front process first), then cleanup_ctx drains and closes models
    async with listening(app, config) as drain_front:
        state = app[STATE]
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(state.started.wait())]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if not stop.is_set() and state.startup_error is None:
            await stop.wait()
        for w in waiters:
            w.cancel()
        code = 0
        if state.startup_error is not None and not stop.is_set():
            log.error("start-up failed: %s", state.startup_error)
            code = 1
        else:
            log.info("stopping: refusing new sessions")
        drain_front()
        if config.drain_grace_s > 0 and code == 0:
            log.info("draining: waiting up to %g s for live sessions to end", config.drain_grace_s)
            left = await drain_sessions(app, config.drain_grace_s, hurry)
            if left:
                log.warning("drain grace over: closing %d live session(s)", left)
        await begin_shutdown(app)
        if config.shutdown_grace_s > 0 and code == 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(hurry.wait(), config.shutdown_grace_s)
        return code
