"""The short fuzz run of `make test` (the long one is `make fuzz`): a few hundred attacker requests of every
kind against a gateway with a live session; no 5xx (503 "full" aside), the live session keeps flowing and is
never touched, the gateway holds no more sessions than its budgets allow afterwards."""

from __future__ import annotations

import random
import time
from dataclasses import replace

import aiohttp
import cv2
import numpy as np

from bench.fuzz import real_offer, run_fuzz
from bench.fuzz_cases import Bombs, generate_cases
from gateway.auth import AuthConfig
from gateway.http.keys import STATE
from gateway.http.rate_limit import RateLimitConfig
from gateway.tenants import Tenant
from tests.harness.fakes import FakePipeline
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish
from tests.harness.waiting import wait_for

LIVE = Tenant("live", "live-token-0123456789")
FUZZ = Tenant("fuzz", "fuzz-token-0123456789", max_sessions=6)


async def test_short_fuzz_no_5xx_and_live_session_unharmed(astronaut: np.ndarray) -> None:
    config = replace(
        gw_config(max_sessions=16, max_pending=4, connect_timeout_s=5.0),
        auth=AuthConfig(tenants=(LIVE, FUZZ)),
        max_body_bytes=1024 * 1024,
        # raised so that the fuzz reaches every endpoint (one address, no pacing); the limit itself is
        # tested in tests/unit/gateway/http/test_rate_limit.py
        rate_limit=RateLimitConfig(rate_per_s=10_000.0, burst=10_000),
    )
    async with running_gateway(config, pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        pub = await publish(
            http,
            gw.url,
            [cv2.resize(astronaut, (160, 120))],
            headers={"Authorization": f"Bearer {LIVE.token}"},
        )
        try:
            sid = pub.location.rsplit("/", 1)[-1]
            assert await wait_for(lambda: len(pub.received.ids) >= 5, 30)
            own = await publish(
                http,
                gw.url,
                [cv2.resize(astronaut, (160, 120))],
                headers={"Authorization": f"Bearer {FUZZ.token}"},
            )
            own_sid = own.location.rsplit("/", 1)[-1]
            cases = list(
                generate_cases(
                    random.Random(13),
                    await real_offer(),
                    400,
                    bombs=Bombs.build(),
                    live_session=sid,
                    own_session=own_sid,
                    token=FUZZ.token,
                    max_body_bytes=1024 * 1024,
                )
            )
            before = len(pub.received.ids)
            t0 = time.monotonic()
            result = await run_fuzz(gw.url, cases, concurrency=4)
            assert result.five_xx == 0, result.server_errors
            assert result.requests + sum(result.transport_errors.values()) == len(cases)
            assert result.requests >= 0.9 * len(cases), result.transport_errors
            assert {"sdp", "trickle", "image", "raw", "huge", "endpoint"} <= set(result.by_kind)
            assert result.by_kind["trickle"][204] + result.by_kind["trickle"][400] > 0, result.by_kind
            await own.close()
            # the live session went on during the attack (15 fps sent; at least a third of them came back)
            elapsed = time.monotonic() - t0
            got = len(pub.received.ids) - before
            assert got >= 15 * elapsed / 3, (got, elapsed)
            manager = gw.app[STATE].sessions
            assert manager is not None and sid in manager.sessions
            assert len(manager.pending()) <= 4
            assert sum(1 for s in manager.sessions.values() if s.owner == "fuzz") <= FUZZ.max_sessions
            async with http.get(gw.url + "/healthz") as r:
                assert r.status == 200
        finally:
            await pub.close()
