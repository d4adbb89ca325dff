"""The HTTP rate limit per client address (issue 13, item 9), on a real gateway: a client past its burst gets
429 with Retry-After before auth or any body is read, every endpoint included; 0 turns it off."""

from __future__ import annotations

from dataclasses import replace

import aiohttp

from gateway.auth import AuthConfig
from gateway.http.keys import STATE
from gateway.http.rate_limit import RateLimitConfig
from tests.integration.conftest import FakePipeline, RecordingMonitor, gw_config, running_gateway


async def test_past_the_burst_every_request_gets_429_with_retry_after() -> None:
    limit = RateLimitConfig(rate_per_s=0.5, burst=3)
    config = replace(gw_config(), rate_limit=limit, auth=AuthConfig(token="secret-token"))
    monitor = RecordingMonitor()
    async with running_gateway(config, pipeline=FakePipeline(), monitor=monitor) as gw:
        async with aiohttp.ClientSession() as http:
            for _ in range(3):
                async with http.get(gw.url + "/healthz") as r:
                    assert r.status == 200
            async with http.get(gw.url + "/healthz") as r:
                assert r.status == 429
                assert 1 <= int(r.headers["Retry-After"]) <= 2
                assert "too many requests" in await r.text()
            # refused before auth and before the body: a big unauthenticated upload is not even looked at
            async with http.post(
                gw.url + "/sources", data=b"\x89PNG" + b"\0" * 100_000, headers={"Content-Type": "image/png"}
            ) as r:
                assert r.status == 429
        assert "rate_limit" in monitor.rejects
        assert "auth" not in monitor.rejects
        assert len(gw.app[STATE].sources) == 0


async def test_zero_turns_the_limit_off() -> None:
    config = replace(gw_config(), rate_limit=RateLimitConfig(rate_per_s=0.0))
    async with running_gateway(config, pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        for _ in range(200):
            async with http.get(gw.url + "/healthz") as r:
                assert r.status == 200
