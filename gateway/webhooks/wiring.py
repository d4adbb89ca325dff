"""Webhooks in the app: subscribed to the monitor's event log, started and stopped with the app, counted in
/api/stats ("webhooks") and /metrics (`livefuse_webhook_deliveries_total{outcome}`)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from gateway.webhooks.delivery import WebhookConfig, Webhooks

logger = logging.getLogger(__name__)

WEBHOOKS = web.AppKey("livefuse_webhooks", Webhooks)


def install(app: web.Application, config: WebhookConfig, monitor: Any) -> Webhooks:
    hooks = Webhooks(config)
    app[WEBHOOKS] = hooks
    if not hooks.enabled:
        return hooks
    events = getattr(monitor, "events", None)
    if events is None or not hasattr(events, "subscribe"):
        logger.warning("webhooks configured, but this monitor has no event log: none will be sent")
        return hooks
    events.subscribe(lambda ev: hooks.offer(ev.kind, ev.message, ev.data, ev.t))

    async def webhooks_ctx(app: web.Application) -> AsyncIterator[None]:
        await hooks.start()
        try:
            yield
        finally:
            await hooks.close()

    # first in, last out: sessions (and their session.ended events) close before the workers stop
    app.cleanup_ctx.insert(0, webhooks_ctx)
    from gateway.monitoring.routes import add_section

    add_section(app, "webhooks", hooks.data, hooks.collector)
    return hooks
