"""The HTTP rate limit per client address, on a real gateway: a client past its burst gets 429 with
Retry-After before auth or any body is read, every endpoint included; 0 turns it off; behind a trusted
proxy the client is the one X-Forwarded-For names. And the image decoder's child process surviving its own
death."""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import replace

import aiohttp
import cv2
import numpy as np

from gateway.auth import AuthConfig
from gateway.http.keys import STATE
from gateway.http.rate_limit import RateLimitConfig
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import gw_config, running_gateway


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


async def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_bucket() -> None:
    """The test client is the proxy (127.0.0.1): trusted, the address it appends is the key; not trusted,
    the header is ignored and every client behind it shares the proxy's bucket."""

    async def statuses(trusted: tuple[str, ...]) -> list[int]:
        limit = RateLimitConfig(rate_per_s=0.01, burst=2, trusted_proxies=trusted)
        config = replace(gw_config(), rate_limit=limit)
        got = []
        async with running_gateway(config, pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
            for client in ("198.51.100.1", "198.51.100.1", "198.51.100.2", "198.51.100.2", "198.51.100.1"):
                # a client's own forged hop first, then what the proxy saw
                forwarded = {"X-Forwarded-For": f"10.9.9.9, {client}"}
                async with http.get(gw.url + "/healthz", headers=forwarded) as r:
                    got.append(r.status)
        return got

    assert await statuses(("127.0.0.1",)) == [200, 200, 200, 200, 429]
    assert await statuses(()) == [200, 200, 429, 429, 429]


async def test_zero_turns_the_limit_off() -> None:
    config = replace(gw_config(), rate_limit=RateLimitConfig(rate_per_s=0.0))
    async with running_gateway(config, pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        for _ in range(200):
            async with http.get(gw.url + "/healthz") as r:
                assert r.status == 200


async def test_a_killed_image_decoder_costs_one_503_and_is_replaced(astronaut: np.ndarray) -> None:
    """Uploads are decoded in a child process (gateway.image_decode); if it dies (killed, out of memory),
    the upload in flight gets 503 + Retry-After and the next one gets a new decoder."""
    ok, png = cv2.imencode(".png", cv2.cvtColor(cv2.resize(astronaut, (128, 128)), cv2.COLOR_RGB2BGR))
    assert ok
    headers = {"Content-Type": "image/png"}
    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        async with http.post(gw.url + "/sources", data=png.tobytes(), headers=headers) as r:
            assert r.status == 201, await r.text()
        pool = gw.app[STATE].background.processes
        (pid,) = list(pool._processes)  # type: ignore[attr-defined]
        assert pid != os.getpid()
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.5)
        async with http.post(gw.url + "/sources", data=png.tobytes(), headers=headers) as r:
            assert r.status == 503 and r.headers["Retry-After"] == "1", await r.text()
        async with http.post(gw.url + "/sources", data=png.tobytes(), headers=headers) as r:
            assert r.status == 201, await r.text()


async def test_a_refused_big_body_is_answered_and_the_connection_closed_not_drained() -> None:
    """A client past its rate that is still sending a big body gets its 429 (Connection: close) and the
    connection is closed at once: without this aiohttp reads and discards the body for up to 10 s."""
    config = replace(gw_config(), rate_limit=RateLimitConfig(rate_per_s=0.1, burst=1))
    async with running_gateway(config, pipeline=FakePipeline()) as gw:
        async with aiohttp.ClientSession() as http, http.get(gw.url + "/healthz") as r:
            assert r.status == 200  # the burst is spent
        host, port = gw.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(
                b"POST /sources HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n"
                b"Content-Length: 50000000\r\n\r\n" + b"\0" * 256_000
            )
            await writer.drain()  # and then nothing more: a lingering server would wait 10 s for the rest
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0)
            assert head.startswith(b"HTTP/1.1 429") and b"connection: close" in head.lower()

            async def until_closed() -> None:
                try:
                    while await reader.read(65536):
                        pass
                except ConnectionResetError:  # unread bytes in the server's buffer: the kernel answers RST
                    pass

            await asyncio.wait_for(until_closed(), 3.0)
        finally:
            writer.close()
