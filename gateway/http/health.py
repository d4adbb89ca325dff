"""Liveness and readiness (readiness = models loaded and warmed, not shutting down)."""

from __future__ import annotations

from aiohttp import web

from gateway.http.keys import STATE


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"alive": True})


async def readyz(request: web.Request) -> web.Response:
    state = request.app[STATE]
    watch = state.engine_watch
    engines_down = list(watch.down) if watch is not None else []
    ready = state.ready and not state.shutting_down and not engines_down
    body: dict[str, object] = {"ready": ready, "shutting_down": state.shutting_down}
    if engines_down:
        body["engines_not_ready"] = engines_down
    return web.json_response(body, status=200 if ready else 503)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
