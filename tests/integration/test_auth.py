"""Bearer token: always on mutating endpoints, on reads only with --protect-reads (where GET also takes
?token=, for EventSource); health probes stay open."""

from __future__ import annotations

import json
from dataclasses import replace

import aiohttp
import cv2
import numpy as np

from gateway.auth import AuthConfig
from tests.harness.fakes import FakePipeline
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish

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


async def test_json_routes_take_json_only_and_whip_still_takes_sdp(astronaut: np.ndarray) -> None:
    """A cross-site page may send text/plain or a form without a CORS preflight: a JSON route answers such a
    body 415 (PATCH /sessions/{id}, POST /sessions/{id}/egress); an empty body needs no type."""
    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        pub = await publish(http, gw.url, [cv2.resize(astronaut, (160, 120))], query="?processors=none")
        session = f"{gw.url}/sessions/{pub.location.rsplit('/', 1)[-1]}"
        try:
            body = json.dumps({"processors": []})
            for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                         None):  # fmt: skip
                headers = {"Content-Type": kind} if kind else {}
                for method, url in (("PATCH", session), ("POST", session + "/egress")):
                    async with http.request(method, url, data=body.encode(), headers=headers) as r:
                        text = await r.text()
                        assert r.status == 415 and "application/json" in text and text.count("\n") == 1, text
            async with http.patch(session, json={"processors": []}) as r:
                assert r.status == 200, await r.text()
            merge = {"Content-Type": "application/merge-patch+json"}
            async with http.patch(session, data=body, headers=merge) as r:
                assert r.status == 200, await r.text()
            async with http.post(session + "/egress") as r:  # no body: the default egress (none here)
                assert r.status == 422
        finally:
            await pub.close()


async def test_without_a_token_a_foreign_host_name_is_refused() -> None:
    """`Host: attacker.example` (a DNS-rebound page) gets 403 from a gateway without a token; with a token
    the token is the guard and every Host is answered."""
    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        for method, path in (("GET", "/api/stats"), ("GET", "/sessions"), ("POST", "/whip")):
            async with http.request(method, gw.url + path, headers={"Host": "attacker.example"}) as r:
                assert r.status == 403 and "not answered" in await r.text()
        async with http.get(gw.url + "/api/stats", headers={"Host": "localhost"}) as r:
            assert r.status == 200
    config = replace(gw_config(), auth=AuthConfig(token=TOKEN))
    async with running_gateway(config, pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        async with http.get(gw.url + "/api/stats", headers={"Host": "gw.example.com"}) as r:
            assert r.status == 200
