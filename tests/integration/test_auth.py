"""Bearer token: always on mutating endpoints, on reads only with --protect-reads (where GET also takes
?token=, for EventSource); health probes stay open."""

from __future__ import annotations

from dataclasses import replace

import aiohttp

from gateway.auth import AuthConfig
from tests.harness.fakes import FakePipeline
from tests.harness.gateway import gw_config, running_gateway

TOKEN = "s3cret-t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
READS = ("/sessions", "/api/stats", "/metrics", "/dashboard", "/demo", "/sources/nope")
MUTATIONS: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("POST", "/sources", {"Content-Type": "image/png"}),
    ("DELETE", "/sources/nope", {}),
    ("POST", "/whip", {"Content-Type": "application/sdp"}),
    ("DELETE", "/whip/nope", {}),
    ("PATCH", "/whip/nope", {"Content-Type": "application/trickle-ice-sdpfrag"}),
    ("POST", "/whep/nope", {"Content-Type": "application/sdp"}),
    ("DELETE", "/whep/nope/viewer", {}),
)


async def _status(http: aiohttp.ClientSession, method: str, url: str, headers: dict[str, str]) -> int:
    async with http.request(method, url, data=b"x", headers=headers) as r:
        if r.status == 401:
            assert r.headers["WWW-Authenticate"].startswith("Bearer")
            assert (await r.text()).count("\n") == 1
        return r.status


async def test_protect_reads() -> None:
    config = replace(gw_config(), auth=AuthConfig(token=TOKEN, protect_reads=True))
    async with running_gateway(config, pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        for path in READS:
            assert await _status(http, "GET", gw.url + path, {}) == 401, path
            assert await _status(http, "GET", gw.url + path, {"Authorization": "Bearer wrong"}) == 401, path
            assert await _status(http, "GET", f"{gw.url}{path}?token=wrong", {}) == 401, path
            want = 404 if path.endswith("nope") else 200
            assert await _status(http, "GET", gw.url + path, AUTH) == want, path
            assert await _status(http, "GET", f"{gw.url}{path}?token={TOKEN}", {}) == want, path
        for path in ("/healthz", "/readyz"):  # probes never need the token
            assert await _status(http, "GET", gw.url + path, {}) == 200
        assert await _status(http, "OPTIONS", gw.url + "/whip", {}) == 204  # CORS preflight carries no token


async def test_token_on_mutating_endpoints_only() -> None:
    config = replace(gw_config(), auth=AuthConfig(token=TOKEN))
    async with running_gateway(config, pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        for path in READS:  # reads are open without --protect-reads
            want = 404 if path.endswith("nope") else 200
            assert await _status(http, "GET", gw.url + path, {}) == want, path
        for method, path, headers in MUTATIONS:
            assert await _status(http, method, gw.url + path, headers) == 401, (method, path)
            # ?token= is for GET (EventSource) only: it never authorises a change
            with_query = f"{gw.url}{path}?token={TOKEN}"
            assert await _status(http, method, with_query, headers) == 401, (method, path)
            # with the header the request reaches its handler (which refuses the junk body on its own terms)
            status = await _status(http, method, gw.url + path, {**headers, **AUTH})
            assert status not in (401, 500), (method, path, status)
