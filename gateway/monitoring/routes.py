"""HTTP surface of the monitor: /metrics, /api/stats, /api/stream (SSE), /dashboard (+ its script), / ->
/dashboard.

Thin handlers: each reads the monitor's `snapshot()` (any `GatewayMonitor`) and formats it. Authentication
is not done here: the gateway's auth middleware guards every route, and the dashboard page forwards `?token=`
from its own URL to its script, API and SSE requests. SSE streams end by themselves when the monitor closes
or the app shuts down, so a browser left open never holds the server's shutdown up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Callable
from pathlib import Path

from aiohttp import web
from prometheus_client.registry import Collector

from .ports import MONITOR_KEY, GatewayMonitor
from .prometheus import CONTENT_TYPE, make_registry, render
from .snapshot import StatsSnapshot

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
_STOP_KEY = web.AppKey("livefuse_monitor_sse_stop", asyncio.Event)
# Functions the app may add to shape /api/stats and /api/stream per request (what an anonymous caller may
# see, figures the monitor does not own such as source memory). Applied in order.
StatsView = Callable[[web.Request, dict[str, object]], dict[str, object]]
STATS_VIEWS = web.AppKey("livefuse_stats_views", list[StatsView])
# The same for /metrics, on the snapshot object (its session labels are ids too).
MetricsView = Callable[[web.Request, StatsSnapshot], StatsSnapshot]
METRICS_VIEWS = web.AppKey("livefuse_metrics_views", list[MetricsView])
# Prometheus families the monitor does not own (the audio relay's counters), made fresh per scrape.
EXTRA_COLLECTORS = web.AppKey("livefuse_extra_collectors", list[Callable[[], Collector]])


def add_section(
    app: web.Application,
    name: str,
    data: Callable[[], object],
    collector: Callable[[], Collector] | None = None,
) -> None:
    """A part of the gateway the monitor does not own shows `data()` under `name` in /api/stats (and
    /api/stream), and `collector`'s families in /metrics. The lists stay mutable after the app is frozen;
    an app without the monitor's routes has neither, and nothing is added."""
    if STATS_VIEWS not in app:
        return

    def view(request: web.Request, stats: dict[str, object]) -> dict[str, object]:
        stats[name] = data()
        return stats

    app[STATS_VIEWS].append(view)
    if collector is not None:
        app[EXTRA_COLLECTORS].append(collector)


def _monitor(request: web.Request) -> GatewayMonitor:
    return request.app[MONITOR_KEY]


async def _metrics(request: web.Request) -> web.Response:
    monitor = _monitor(request)

    def snapshot() -> StatsSnapshot:
        snap = monitor.snapshot()
        for view in request.app.get(METRICS_VIEWS, ()):
            snap = view(request, snap)
        return snap

    registry = make_registry(snapshot)
    for make_collector in request.app.get(EXTRA_COLLECTORS, ()):
        registry.register(make_collector())
    body = await asyncio.to_thread(render, registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


def _snapshot(request: web.Request) -> dict[str, object]:
    data = _monitor(request).snapshot_dict()
    for view in request.app.get(STATS_VIEWS, ()):
        data = view(request, data)
    return data


async def _stats(request: web.Request) -> web.Response:
    return web.json_response(_snapshot(request), dumps=_dumps)


def _dumps(obj: object) -> str:
    try:
        return json.dumps(obj, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:  # a NaN/inf slipped in: browsers reject bare NaN, so send null instead
        return json.dumps(_finite(obj), separators=(",", ":"), default=str)


def _finite(obj: object) -> object:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def _sse_period(request: web.Request) -> float:
    """The push period: at least once a second, faster when asked (`?period=0.25`, floored at 0.1 s)."""
    try:
        period = float(request.query.get("period", "1.0"))
    except ValueError:
        period = 1.0
    return min(1.0, max(0.1, period))


async def _stream(request: web.Request) -> web.StreamResponse:
    monitor = _monitor(request)
    stop = request.app[_STOP_KEY]
    period = _sse_period(request)
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    await resp.prepare(request)
    await resp.write(b"retry: 2000\n\n")
    seq = 0
    with contextlib.suppress(ConnectionResetError):
        while not stop.is_set() and not monitor.closed:
            seq += 1
            payload = _dumps(_snapshot(request))
            await resp.write(f"id: {seq}\nevent: stats\ndata: {payload}\n\n".encode())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), period)
    return resp


async def _dashboard(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC_DIR / "dashboard.html", headers={"Cache-Control": "no-cache"})


async def _dashboard_js(request: web.Request) -> web.FileResponse:
    return web.FileResponse(
        STATIC_DIR / "dashboard.js",
        headers={"Cache-Control": "no-cache", "Content-Type": "text/javascript; charset=utf-8"},
    )


async def _root(request: web.Request) -> web.Response:
    raise web.HTTPFound("/dashboard" + (f"?{request.query_string}" if request.query_string else ""))


async def _signal_stop(app: web.Application) -> None:
    app[_STOP_KEY].set()


def setup_monitoring_routes(app: web.Application, monitor: GatewayMonitor) -> None:
    """Mounts the monitoring routes and stores the monitor under `MONITOR_KEY`. The monitor's start/close
    belong to whoever created it (the gateway's cleanup_ctx)."""
    app[MONITOR_KEY] = monitor
    app[_STOP_KEY] = asyncio.Event()
    app.on_shutdown.append(_signal_stop)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/api/stats", _stats)
    app.router.add_get("/api/stream", _stream)
    app.router.add_get("/dashboard", _dashboard)
    app.router.add_get("/dashboard.js", _dashboard_js)
    app.router.add_get("/", _root)
