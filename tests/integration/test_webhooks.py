"""Webhooks against a local aiohttp receiver that verifies every signature: session.started (after one 500,
retried with the same delivery id), degraded, egress.failed and session.ended arrive signed, while a second
receiver that never answers holds up neither the other one nor the session's media."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import cv2
import numpy as np
from aiohttp import web

from gateway.egress.config import EgressConfig
from gateway.egress.policy import RetryConfig
from gateway.monitoring.monitor import Monitor, MonitorConfig
from gateway.webhooks.delivery import WebhookConfig
from gateway.webhooks.signature import DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, verify
from loadgen.embedded import start_site
from tests.harness.fakes import FakePipeline
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish
from tests.harness.waiting import wait_for

SECRET = "webhook-secret"


@dataclass
class Receiver:
    fail_first: int = 1
    got: list[dict[str, Any]] = field(default_factory=list)  # verified deliveries
    attempts: list[str] = field(default_factory=list)  # delivery ids, every attempt
    unsigned: int = 0
    hang: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        app.router.add_post("/slow", self._slow)
        app.router.add_post("/whip-refuses", self._refuse)
        return app

    async def _hook(self, request: web.Request) -> web.Response:
        raw = await request.read()
        if not verify(SECRET, raw, request.headers.get(SIGNATURE_HEADER, ""), time.time()):
            self.unsigned += 1
            return web.Response(status=401)
        self.attempts.append(request.headers[DELIVERY_HEADER])
        if self.fail_first > 0:
            self.fail_first -= 1
            return web.Response(status=500)
        body = json.loads(raw)
        assert body["event"] == request.headers[EVENT_HEADER]
        assert body["id"] == request.headers[DELIVERY_HEADER]
        self.got.append(body)
        return web.Response(status=204)

    async def _slow(self, request: web.Request) -> web.Response:
        await self.hang.wait()
        return web.Response(status=204)

    async def _refuse(self, request: web.Request) -> web.Response:
        return web.Response(status=401, text="bad token")

    def events(self) -> list[str]:
        return [g["event"] for g in self.got]


async def test_signed_webhooks_arrive_with_retries_and_never_block(astronaut: np.ndarray) -> None:
    receiver = Receiver()
    runner = web.AppRunner(receiver.app())
    await runner.setup()
    base = f"http://127.0.0.1:{await start_site(runner)}"
    config = replace(
        gw_config(),
        webhooks=WebhookConfig(urls=(f"{base}/hook", f"{base}/slow"), secret=SECRET, timeout_s=30.0),
        egress=EgressConfig(
            default_url=f"{base}/whip-refuses",
            host_addresses=("127.0.0.1",),
            retry=RetryConfig(max_attempts=1),
        ),
    )
    monitor = Monitor(MonitorConfig(nvml=False))
    try:
        async with (
            running_gateway(config, pipeline=FakePipeline(), monitor=monitor) as gw,
            aiohttp.ClientSession() as http,
        ):
            pub = await publish(http, gw.url, [cv2.resize(astronaut, (160, 120))], query="?processors=none")
            session_id = pub.location.rsplit("/", 1)[-1]
            try:
                first = {"session.started", "egress.failed"}
                assert await wait_for(lambda: first <= set(receiver.events()), 20)
                monitor.event("degradation", "degradation level 0 -> 1 (test)", **{"from": 0, "to": 1})
                assert await wait_for(lambda: "degraded" in receiver.events(), 20)
                received = len(pub.received.ids)
                assert await wait_for(lambda: len(pub.received.ids) >= received + 15, 20)  # media flows on
            finally:
                await pub.close()
            async with http.delete(f"{gw.url}{pub.location}") as r:
                assert r.status in (200, 404)
            assert await wait_for(lambda: "session.ended" in receiver.events(), 20)
            async with http.get(f"{gw.url}/api/stats") as r:
                stats = (await r.json())["webhooks"]["targets"]
        started = next(g for g in receiver.got if g["event"] == "session.started")
        assert started["data"]["session_id"] == session_id
        # the first attempt was answered 500; the retry carried the same delivery id
        assert receiver.attempts[0] == receiver.attempts[1] == started["id"]
        failed = next(g for g in receiver.got if g["event"] == "egress.failed")
        assert failed["data"]["session_id"] == session_id and "401" in failed["data"]["reason"]
        ended = next(g for g in receiver.got if g["event"] == "session.ended")
        assert ended["data"]["session_id"] == session_id
        assert receiver.unsigned == 0
        hook, slow = stats
        assert hook["delivered"] >= 4 and hook["retried"] >= 1 and hook["failed"] == 0
        # the hung receiver holds its first delivery; the other events wait in its own queue
        assert slow["url"].endswith("/slow") and slow["delivered"] == 0 and slow["pending"] >= 3, slow
    finally:
        receiver.hang.set()
        await runner.cleanup()
