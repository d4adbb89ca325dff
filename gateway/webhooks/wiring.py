"""Webhooks in the app: subscribed to the monitor's event log, started and stopped with the app, counted in
/api/stats ("webhooks") and /metrics (`livefuse_webhook_deliveries_total{outcome}`)."""

from __future__ import annotations

from aiohttp import web

from gateway.monitoring.ports import GatewayMonitor
from gateway.webhooks.delivery import WebhookConfig, Webhooks

WEBHOOKS = web.AppKey("livefuse_webhooks", Webhooks)


def install(app: web.Application, config: WebhookConfig, monitor: GatewayMonitor) -> Webhooks:
    """The deliveries under `WEBHOOKS`, fed by `monitor`'s events; the app starts and closes them (first in,
    last out, so that the sessions' last events still go out)."""
    hooks = Webhooks(config)
    app[WEBHOOKS] = hooks
    if not hooks.enabled:
        return hooks
    monitor.on_event(lambda ev: hooks.offer(ev.kind, ev.message, ev.data, ev.t))
    from gateway.monitoring.routes import add_section

    add_section(app, "webhooks", hooks.data, hooks.collector)
    return hooks
