"""Webhook delivery: one bounded queue and one worker per URL, bounded retries, never on the media path.

`Webhooks.offer` may be called from any thread: it maps the monitor event to a webhook event (pure) and hands
it to the loop with `call_soon_threadsafe`, never waiting. Each URL has its own queue (full: the oldest event
is dropped and counted) and worker, so a slow receiver delays only itself. Network errors, timeouts, 408, 429
and 5xx are retried with growing backoff up to `max_attempts`; other statuses end the delivery.
Body: `{"id", "event", "time", "message", "data"}` as JSON; headers `Livefuse-Event`, `Livefuse-Delivery`
(the id, the same on every retry, for deduplication) and `Livefuse-Signature` (gateway.webhooks.signature).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from gateway.webhooks.signature import DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, sign

logger = logging.getLogger(__name__)

EVENTS = ("session.started", "session.ended", "session.degraded", "degraded", "egress.failed")
OUTCOMES = ("delivered", "failed", "dropped", "retried")


@dataclass(frozen=True)
class WebhookConfig:
    urls: tuple[str, ...] = ()
    secret: str | None = None
    events: tuple[str, ...] = EVENTS
    max_attempts: int = 5
    timeout_s: float = 5.0
    max_queue: int = 256  # undelivered events per URL
    max_delay_s: float = 30.0

    def __post_init__(self) -> None:
        for url in self.urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"webhook URL must be an absolute http(s) URL, got {url!r}")
        if self.urls and not self.secret:
            raise ValueError("webhooks need a signing secret (--webhook-secret or --webhook-secret-file)")
        unknown = [e for e in self.events if e not in EVENTS]
        if unknown:
            raise ValueError(f"unknown webhook event(s) {', '.join(unknown)} (known: {', '.join(EVENTS)})")
        if self.max_attempts < 1 or self.timeout_s <= 0 or self.max_queue < 1:
            raise ValueError("webhook attempts and queue must be >= 1, timeout > 0")


def webhook_event(kind: str, data: dict[str, Any]) -> str | None:
    """The webhook event a monitor event is, or None: session_open/close, a session's drop burst,
    the gateway's degradation level change, an egress push that gave up."""
    if kind == "session_open":
        return "session.started"
    if kind == "session_close":
        return "session.ended"
    if kind == "drops":
        return "session.degraded"
    if kind == "degradation":
        return "degraded"
    if kind == "egress" and data.get("state") == "failed":
        return "egress.failed"
    return None


def retry_delay_s(attempt: int, max_delay_s: float) -> float:
    """Wait before attempt `attempt + 1` (attempt counts from 1)."""
    return float(min(max_delay_s, 0.5 * 2 ** (attempt - 1)))


def _retryable(status: int | None) -> bool:
    return status is None or status >= 500 or status in (408, 429)


class _Target:
    def __init__(self, url: str, max_queue: int) -> None:
        self.url = url
        self.queue: deque[tuple[str, bytes]] = deque()  # (event, body)
        self.max_queue = max_queue
        self.wake = asyncio.Event()
        self.counts = dict.fromkeys(OUTCOMES, 0)
        self.busy = False  # a delivery (with its retries) in progress

    def put(self, event: str, body: bytes) -> None:
        if len(self.queue) >= self.max_queue:
            self.queue.popleft()
            self.counts["dropped"] += 1
        self.queue.append((event, body))
        self.wake.set()


class Webhooks:
    """`start()` on the loop, `offer()` from anywhere, `close()` stops the workers (pending events are lost:
    a receiver must not rely on webhooks alone for state, as with any webhook)."""

    def __init__(self, config: WebhookConfig) -> None:
        self.config = config
        self._targets = [_Target(url, config.max_queue) for url in config.urls]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self._targets)

    async def start(self) -> None:
        if not self.enabled or self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._http = aiohttp.ClientSession()
        for target in self._targets:
            self._tasks.append(self._loop.create_task(self._work(target), name=f"webhook {target.url}"))

    async def close(self, drain_s: float = 2.0) -> None:
        """Stop the workers after up to `drain_s` for what is queued (a stopping gateway's session.ended)."""
        deadline = time.monotonic() + drain_s
        while any(t.queue or t.busy for t in self._targets) and self._tasks and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        with self._lock:
            self._loop = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._http is not None:
            await self._http.close()
            self._http = None

    def offer(self, kind: str, message: str, data: dict[str, Any], wall_s: float | None = None) -> None:
        """A monitor event (any thread). Never blocks; events nobody subscribed to cost a dict lookup."""
        event = webhook_event(kind, data)
        if event is None or event not in self.config.events:
            return
        body = json.dumps(
            {
                "id": secrets.token_hex(12),
                "event": event,
                "time": round(time.time() if wall_s is None else wall_s, 3),
                "message": message,
                "data": data,
            },
            default=str,
            separators=(",", ":"),
        ).encode()
        with self._lock:
            loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._enqueue, event, body)
        except RuntimeError:  # the loop closed meanwhile
            pass

    def _enqueue(self, event: str, body: bytes) -> None:
        for target in self._targets:
            target.put(event, body)

    async def _work(self, target: _Target) -> None:
        while True:
            while not target.queue:
                target.wake.clear()
                await target.wake.wait()
            event, body = target.queue.popleft()
            target.busy = True
            try:
                await self._deliver(target, event, body)
            finally:
                target.busy = False

    async def _deliver(self, target: _Target, event: str, body: bytes) -> None:
        assert self._http is not None
        delivery = json.loads(body)["id"]
        for attempt in range(1, self.config.max_attempts + 1):
            status: int | None = None
            headers = {
                "Content-Type": "application/json",
                EVENT_HEADER: event,
                DELIVERY_HEADER: delivery,
                SIGNATURE_HEADER: sign(self.config.secret or "", body, int(time.time())),
            }
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                timeout = aiohttp.ClientTimeout(total=self.config.timeout_s)
                async with self._http.post(target.url, data=body, headers=headers, timeout=timeout) as reply:
                    status = reply.status
            if status is not None and 200 <= status < 300:
                target.counts["delivered"] += 1
                return
            if not _retryable(status) or attempt == self.config.max_attempts:
                break
            target.counts["retried"] += 1
            await asyncio.sleep(retry_delay_s(attempt, self.config.max_delay_s))
        target.counts["failed"] += 1
        logger.warning("webhook %s to %s not delivered (last status %s)", event, target.url, status or "none")

    # --- stats ----------------------------------------------------------------------------------------
    def data(self) -> dict[str, Any]:
        return {
            "targets": [{"url": t.url, "pending": len(t.queue), **t.counts} for t in self._targets],
        }

    def collector(self) -> Collector:
        return _WebhookCollector(self._targets)


class _WebhookCollector(Collector):
    def __init__(self, targets: list[_Target]) -> None:
        self._targets = targets

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "livefuse_webhook_deliveries", "Webhook deliveries by outcome", labels=["outcome"]
        )
        for outcome in OUTCOMES:
            family.add_metric([outcome], sum(t.counts[outcome] for t in self._targets))
        yield family
