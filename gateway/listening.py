"""Where the gateway's HTTP is served: on its own TCP port, or behind the front process (gateway.front).

`listening(app, config)` is the one place that decides. Behind the front, the media app listens only on a
Unix socket in a private directory (mode 0700), without its own access log (the front logs each request,
with the client's address and the token redacted) and without its own rate limit (every request would come
from the one front: `media_config` turns it off; the front applies it per client address instead).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.exposure_rule import check_bound
from gateway.http.access_log import runner_options
from gateway.http.keys import MONITOR
from gateway.http.metrics_listener import BOUND, bound_addresses, public_routes
from gateway.http.rate_limit import RateLimitConfig
from gateway.http.tls import server_context

if TYPE_CHECKING:
    from gateway.front.supervisor import FrontProcess

log = logging.getLogger("gateway")
FRONT_REJECTS = frozenset({"rate_limit", "auth", "bad_request"})  # what the front counts (gateway.front.app)


def media_config(config: GatewayConfig) -> GatewayConfig:
    """The config the media app is built with: without a rate limit when the front applies it."""
    return replace(config, rate_limit=RateLimitConfig(rate_per_s=0)) if config.front_process else config


@contextlib.asynccontextmanager
async def listening(app: web.Application, config: GatewayConfig) -> AsyncIterator[Callable[[], None]]:
    """Serve until the block ends; then the front stops first (no new requests), then the app's cleanup.
    Yields `drain`: call it when shutting down, so that the front refuses new sessions as the app does."""
    if not config.front_process:
        runner = web.AppRunner(app, handle_signals=False, **runner_options(config.header_timeout_s))
        await runner.setup()
        try:
            context = None if config.tls is None else server_context(config.tls)
            await _metrics_site(app, runner, config)
            before = list(runner.addresses)
            await web.TCPSite(runner, config.host, config.port, ssl_context=context).start()
            public = config.listeners()[0]
            check_bound(public, [a for a in runner.addresses if a not in before], open_=config.anonymous)
            log.info("listening on %s://%s:%d", scheme(config), config.host, config.port)
            yield lambda: None
        finally:
            await runner.cleanup()
        return
    from gateway.front.config import PRIVATE_DIR_PREFIX, front_config
    from gateway.front.supervisor import FrontProcess, bind_listener
    from gateway.front.upstream import MEDIA_IDLE_S

    monitor = app[MONITOR]

    def record(counts: dict[str, int]) -> None:
        for reason, count in counts.items():
            if reason in FRONT_REJECTS:
                for _ in range(count):
                    monitor.record_reject(reason)

    listener = bind_listener(config.host, config.port)
    try:
        check_bound(config.listeners()[0], [listener.getsockname()], open_=config.anonymous)
    except ValueError:
        listener.close()
        raise
    private = Path(tempfile.mkdtemp(prefix=PRIVATE_DIR_PREFIX))
    runner = web.AppRunner(app, handle_signals=False, access_log=None, keepalive_timeout=MEDIA_IDLE_S)
    front: FrontProcess | None = None
    try:
        await runner.setup()
        media_socket = str(private / "media.sock")
        await web.UnixSite(runner, media_socket).start()
        await _metrics_site(app, runner, config)
        routes = public_routes(config.metrics, routes_of(app))
        front = FrontProcess(front_config(config, routes), listener, media_socket, record)
        await front.start()
        _show(app, front)
        log.info(
            "listening on %s://%s:%d (front process %s, nice %d, CPUs %s; media process on %s)",
            scheme(config),
            config.host,
            config.port,
            front.pid,
            config.front_nice,
            ",".join(map(str, config.front_cpus)) or "any",
            media_socket,
        )
        yield front.drain
    finally:
        if front is not None:
            await front.stop()
        listener.close()
        await runner.cleanup()
        shutil.rmtree(private, ignore_errors=True)


async def _metrics_site(app: web.Application, runner: web.AppRunner, config: GatewayConfig) -> None:
    """The monitoring routes' own listener (gateway.http.metrics_listener), plain HTTP, in the media
    process: started before the public one, so the addresses it adds are its own."""
    listener = config.metrics
    if listener.port is None:
        return
    before = list(runner.addresses)
    await web.TCPSite(runner, listener.address, listener.port).start()
    added = [a for a in runner.addresses if a not in before]
    check_bound(config.listeners()[-1], added, open_=config.anonymous)
    bound = bound_addresses(added)
    app[BOUND].update(bound)
    for address, port in sorted(bound):
        log.info("%s on http://%s:%d", ", ".join(listener.groups), address, port)


def scheme(config: GatewayConfig) -> str:
    return "http" if config.tls is None else "https"


def routes_of(app: web.Application) -> tuple[tuple[str, str], ...]:
    """(method, path pattern) of every route `app` answers: the front process routes exactly these."""
    return tuple((r.method, r.resource.canonical) for r in app.router.routes() if r.resource is not None)


def _show(app: web.Application, front: FrontProcess) -> None:
    """The front's numbers in /api/stats and /metrics (gateway.monitoring.front_section)."""
    from gateway.monitoring.front_section import FrontSection, read_status
    from gateway.monitoring.routes import add_section

    section = FrontSection(lambda: read_status(front.pid, front.restarts))
    add_section(app, section.name, section.data, section.collector)
