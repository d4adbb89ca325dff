"""The monitoring routes as this gateway serves them: the monitor's own (/metrics, /api/stats, /api/stream,
the dashboard, gateway.monitoring.routes) with the views and sections that need the HTTP side: what a caller
may see (gateway.http.exposure), the audio relay's totals, the build and the container."""

from __future__ import annotations

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.http import exposure
from gateway.http.keys import STATE
from gateway.monitoring.ports import GatewayMonitor


def monitoring_routes(app: web.Application, config: GatewayConfig, monitor: GatewayMonitor) -> None:
    """/metrics, /api/stats, /api/stream and the dashboard, with the sections the monitor does not own: source
    memory and exposure (gateway.http.exposure), the audio relay's totals, the build and the container."""
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

    setup_monitoring_routes(app, monitor)
    state = app[STATE]

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
