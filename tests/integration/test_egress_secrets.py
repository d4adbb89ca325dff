"""An egress URL's path and query (where platforms put stream keys) reach no one but the session's owner and
admins: /api/stats, /api/stream, events, their messages and data, and the logs name the endpoint by scheme,
host and port, and an endpoint's refusal text is cut short."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import aiohttp
import cv2
import numpy as np
import pytest
from aiohttp import web

from gateway.auth import AuthConfig
from gateway.egress.config import EgressConfig
from gateway.tenants import Tenant
from loadgen.embedded import start_site
from tests.harness.fakes import FakePipeline
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish
from tests.harness.waiting import until

KEY = "bob-stream-key-SECRET123"
ADMIN = Tenant("ops", "ops-token-0123456789", admin=True)
BOB = Tenant("bob", "bob-token-0123456789")
ALICE = Tenant("alice", "alice-token-0123456789")


def _refusing_endpoint(seen: list[str]) -> web.Application:
    """Refuses every offer, echoing the URL it was asked at (as many servers do) in a long first line."""

    async def whip(request: web.Request) -> web.Response:
        seen.append(request.path_qs)
        if request.method == "OPTIONS":
            return web.Response(status=204)
        return web.Response(status=403, text=f"unknown stream {request.path_qs} " + "x" * 300 + "\nmore")

    app = web.Application()
    app.router.add_route("*", "/whip/{key}", whip)
    return app


def _bearer(tenant: Tenant) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.token}"}


async def _first_sse_event(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(url) as r:
        assert r.status == 200
        while True:  # the first `data:` line (a `retry:` hint comes before it)
            line = (await r.content.readline()).decode()
            if line.startswith("data:"):
                return line


async def test_stream_keys_in_egress_urls_reach_only_owner_and_admin(
    astronaut: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []
    runner = web.AppRunner(_refusing_endpoint(seen))
    await runner.setup()
    port = await start_site(runner)
    egress = EgressConfig(allowed_prefixes=(f"http://127.0.0.1:{port}/whip",), host_addresses=("127.0.0.1",))
    config = replace(
        gw_config(),
        auth=AuthConfig(tenants=(ADMIN, BOB, ALICE)),
        egress=replace(egress, retry=replace(egress.retry, max_attempts=1)),
    )
    target = f"http://127.0.0.1:{port}/whip/{KEY}?room=SECRET456"
    try:
        with caplog.at_level(logging.DEBUG):
            async with (
                running_gateway(config, pipeline=FakePipeline()) as gw,
                aiohttp.ClientSession() as http,
            ):
                query = f"?processors=none&egress={target.replace('?', '%3F')}"
                pub = await publish(http, gw.url, [cv2.resize(astronaut, (160, 120))], query=query,
                                    headers=_bearer(BOB))  # fmt: skip
                session_id = pub.location.rsplit("/", 1)[-1]
                egress_url = f"{gw.url}/sessions/{session_id}/egress"

                async def failed() -> bool:
                    async with http.get(egress_url, headers=_bearer(BOB)) as r:
                        return (await r.json())["state"] == "failed"

                try:
                    assert await until(failed, 30)
                    assert seen and KEY in seen[-1]  # the endpoint itself was asked at the full URL
                    for who in ({}, _bearer(ALICE)):  # anonymous reads, another tenant
                        async with http.get(f"{gw.url}/api/stats", headers=who) as r:
                            stats = await r.text()
                        assert r.status == 200 and "egress" in stats and f"127.0.0.1:{port}" in stats
                        assert KEY not in stats and "SECRET456" not in stats, stats
                        stream = await _first_sse_event(http, f"{gw.url}/api/stream")
                        assert "egress" in stream and KEY not in stream and "SECRET456" not in stream
                    async with http.get(f"{gw.url}/api/stats", headers=_bearer(ADMIN)) as r:
                        events = [e for e in (await r.json())["events"] if e["kind"] == "egress"]
                    assert events and all(e["data"]["url"] == f"http://127.0.0.1:{port}" for e in events)
                    refusal = next(e for e in events if e["data"]["state"] == "failed")["data"]["reason"]
                    assert "403" in refusal and len(refusal) < 140 and "\n" not in refusal, refusal
                    async with http.get(egress_url, headers=_bearer(ALICE)) as r:
                        assert r.status == 404  # not hers
                    for owner in (BOB, ADMIN):
                        async with http.get(egress_url, headers=_bearer(owner)) as r:
                            assert (await r.json())["url"] == target
                finally:
                    await pub.close()
            await asyncio.sleep(0)
    finally:
        await runner.cleanup()
    # the gateway's own logs (this harness serves both apps with aiohttp's plain access log: the gateway's
    # redacting one is tested with the access log's other secrets)
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name != "aiohttp.access")
    assert f"127.0.0.1:{port}" in logged and KEY not in logged and "SECRET456" not in logged
