"""The egress allow-list against a running gateway: every way around it is answered 403 and nothing is ever
connected to, redirects and foreign Locations are not followed, and a host name that re-resolves to a
refused address is refused on connection. Every listener here is on 127.0.0.1; the URLs that would leave
the machine are refused before any connection is tried."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import replace
from functools import partial

import aiohttp
import cv2
import numpy as np
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from gateway.egress.config import EgressConfig
from gateway.egress.destinations import AllowList
from gateway.egress.guarded_resolver import GuardedResolver
from gateway.http.rate_limit import RateLimitConfig
from loadgen.embedded import start_site
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish
from tests.harness.waiting import wait_for


class Sink:
    """A TCP listener that only counts the connections made to it."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.connections = 0
        self.port = 0
        self.host = host
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Sink:
        def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            writer.close()

        self._server = await asyncio.start_server(accept, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()


def _misleading_endpoint(sink: int, seen: list[str]) -> web.Application:
    """An allowed endpoint that points elsewhere: a 307 redirect, and a 201 whose Location is the sink."""

    async def redirect(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path}")
        raise web.HTTPTemporaryRedirect(f"http://127.0.0.1:{sink}/whip")

    async def foreign_location(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path}")
        if request.method == "OPTIONS":
            return web.Response(status=204)
        answer = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
        headers = {"Location": f"http://127.0.0.1:{sink}/resource/1", "Content-Type": "application/sdp"}
        return web.Response(status=201, text=answer, headers=headers)

    async def outside_the_prefix(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path}")
        if request.method == "OPTIONS":
            return web.Response(status=204)
        answer = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
        headers = {"Location": "/admin/delete-everything", "Content-Type": "application/sdp"}
        return web.Response(status=201, text=answer, headers=headers)

    async def anything_else(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path}")
        return web.Response(status=204)

    app = web.Application()
    app.router.add_route("*", "/redirect", redirect)
    app.router.add_route("*", "/foreign", foreign_location)
    app.router.add_route("*", "/whip", outside_the_prefix)
    app.router.add_route("*", "/{tail:.*}", anything_else)
    return app


@pytest.fixture
async def misleading() -> AsyncIterator[tuple[Sink, int, list[str]]]:
    async with Sink() as sink:
        seen: list[str] = []
        runner = web.AppRunner(_misleading_endpoint(sink.port, seen))
        await runner.setup()
        port = await start_site(runner)
        try:
            yield sink, port, seen
        finally:
            await runner.cleanup()


def _bypasses(sink: int, endpoint: int, anything: bool) -> list[str]:
    """Ways around the list. With `*` allowed (`anything`), only those refused without asking DNS, or
    resolved from /etc/hosts (localhost): a test never sends a name to a resolver beyond the machine."""
    common = [
        f"http://sfu.example@127.0.0.1:{sink}/whip",
        f"http://sfu.example:x@127.0.0.1:{sink}/whip",
        "https://sfu.example/whip/%2e%2e/admin",
        "https://sfu%2eexample/whip",
        f"http://127.0.0.1:{sink}/whip",
        f"http://127.0.0.1.:{sink}/whip",
        f"HTTP://127.0.0.1:{sink}/whip",
        f"http://[::ffff:127.0.0.1]:{sink}/whip",
        f"http://[::1]:{sink}/whip",
        f"http://2130706433:{sink}/whip",
        f"http://0x7f.1:{sink}/whip",
        f"http://0177.0.0.1:{sink}/whip",
        f"http://127.0.0.1:{endpoint}/redirect/../foreign",
        "https://169.254.169.254/latest/meta-data",
        "http://[fd00:ec2::254]/",
        f"http://[64:ff9b::7f00:1]:{sink}/whip",  # NAT64: 127.0.0.1
        f"http://[2002:7f00:1::1]:{sink}/whip",  # 6to4: 127.0.0.1
        f"http://[::7f00:1]:{sink}/whip",  # IPv4-compatible
        f"http://[::ffff:0:7f00:1]:{sink}/whip",  # IPv4-translated
        "http://[fec0::1]/whip",  # site-local
        f"http://127.0.0.1:{endpoint}/redirect%2fx",  # paths a server may read outside the prefix
        f"http://127.0.0.1:{endpoint}/redirect/%252e%252e/admin",
        f"http://127.0.0.1:{endpoint}/redirect/..;/admin",
        f"http://127.0.0.1:{endpoint}/redirect/%00",
    ]
    if anything:  # names that resolve to loopback
        return [*common, f"http://localhost:{sink}/whip", f"http://LocalHost.:{sink}/whip"]
    return [
        *common,
        "https://sfu.example.attacker.net/whip",
        "https://sfu.example:444/whip",
        "http://sfu.example/whip",
        "https://sfu.example/whipper",
        "https://SFU.example.:444/whip",
        f"http://localhost:{sink}/whip",  # a name no entry names
        f"http://127.0.0.1:{endpoint}/redirectx",
    ]


@pytest.mark.parametrize("anything", [False, True], ids=["named-entries", "with-any"])
async def test_every_bypass_is_403_and_never_connected(
    misleading: tuple[Sink, int, list[str]], astronaut: np.ndarray, anything: bool
) -> None:
    sink, endpoint, seen = misleading
    named = ("https://sfu.example/whip", f"http://127.0.0.1:{endpoint}/redirect")
    allow = (*named, "*") if anything else named
    egress = EgressConfig(allowed_prefixes=allow, host_addresses=("127.0.0.1",))
    config = replace(gw_config(), egress=egress, rate_limit=RateLimitConfig(rate_per_s=0))  # many requests
    sdp = {"Content-Type": "application/sdp"}
    bypasses = _bypasses(sink.port, endpoint, anything)
    async with (
        running_gateway(config, pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        for url in bypasses:
            async with http.post(f"{gw.url}/whip", params={"egress": url}, data="v=0\r\n", headers=sdp) as r:
                assert r.status == 403, (url, r.status, await r.text())
                assert "\n" not in (await r.text()).strip()
        pub = await publish(http, gw.url, [cv2.resize(astronaut, (160, 120))], query="?processors=none")
        session_id = pub.location.rsplit("/", 1)[-1]
        try:
            for url in bypasses:
                async with http.post(f"{gw.url}/sessions/{session_id}/egress", json={"url": url}) as r:
                    assert r.status == 403, (url, r.status, await r.text())
        finally:
            await pub.close()
    assert sink.connections == 0 and seen == []


async def test_redirects_and_foreign_locations_are_not_followed(
    misleading: tuple[Sink, int, list[str]], astronaut: np.ndarray
) -> None:
    """A 3xx, a Location on another origin, and a Location outside the entry's path (`/admin/...` for an
    entry `/whip`): the push fails, and nothing, DELETE with the endpoint's token least of all, goes there."""
    sink, endpoint, seen = misleading
    allow = tuple(f"http://127.0.0.1:{endpoint}/{path}" for path in ("redirect", "foreign", "whip"))
    egress = EgressConfig(allowed_prefixes=allow, host_addresses=("127.0.0.1",))
    config = replace(gw_config(), egress=replace(egress, retry=replace(egress.retry, max_attempts=1)))
    monitor = RecordingMonitor()
    async with (
        running_gateway(config, pipeline=FakePipeline(), monitor=monitor) as gw,
        aiohttp.ClientSession() as http,
    ):
        for path in ("redirect", "foreign", "whip"):
            query = f"?processors=none&egress=http://127.0.0.1:{endpoint}/{path}"
            pub = await publish(http, gw.url, [cv2.resize(astronaut, (160, 120))], query=query)
            session_id = pub.location.rsplit("/", 1)[-1]
            try:
                assert await wait_for(partial(_failed, monitor, session_id), 30), monitor.events
                reasons = [m for m, _ in _egress_events(monitor, session_id)]
                word = {"redirect": "redirects are not followed", "foreign": "not on the endpoint's origin",
                        "whip": "outside the endpoint's path prefix"}[path]  # fmt: skip
                assert any(word in m for m in reasons), reasons
            finally:
                await pub.close()
    assert f"POST /{'redirect'}" in seen and "POST /foreign" in seen and "POST /whip" in seen
    assert not any("/admin" in request for request in seen), seen
    assert sink.connections == 0  # neither the redirect's target nor the foreign Location (no DELETE there)


def _egress_events(monitor: RecordingMonitor, session_id: str) -> list[tuple[str, str]]:
    """(message, state) of every egress event of the session."""
    events = monitor.events
    return [(m, d["state"]) for kind, m, d in events if kind == "egress" and d["session_id"] == session_id]


def _failed(monitor: RecordingMonitor, session_id: str) -> bool:
    return any(state == "failed" for _, state in _egress_events(monitor, session_id))


class _Rebinding(AbstractResolver):
    """DNS that answers a loopback address for a name that was public when it was checked."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [ResolveResult(hostname=host, host="127.0.0.1", port=port, family=socket.AF_INET, proto=0,
                              flags=socket.AI_NUMERICHOST)]  # fmt: skip

    async def close(self) -> None:
        return None


async def test_a_name_that_rebinds_to_a_refused_address_is_refused_on_connection() -> None:
    async with Sink() as sink:
        for allow in (("*",), ("https://sfu.example/whip", "*")):
            resolver = GuardedResolver(AllowList.parse(allow), inner=_Rebinding(sink.port))
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(resolver=resolver)) as http:
                with pytest.raises(aiohttp.ClientConnectorError) as info:
                    await http.post(f"http://rebind.example:{sink.port}/whip", data=b"v=0")
                assert "resolves to 127.0.0.1" in str(info.value.__cause__ or info.value.os_error), info.value
        assert sink.connections == 0
        # the operator's own --egress-url host is trusted as configured
        trusted = frozenset({("own.example", sink.port)})
        resolver = GuardedResolver(AllowList.parse(("*",)), trusted, inner=_Rebinding(sink.port))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(resolver=resolver)) as http:
            with pytest.raises(aiohttp.ClientError):  # the sink closes at once: it was reached
                await http.post(f"http://own.example:{sink.port}/whip", data=b"v=0")
        assert await wait_for(lambda: sink.connections == 1, 5)


def _steering_endpoint(turn: str, seen: list[str]) -> web.Application:
    """An allowed endpoint that offers a TURN server elsewhere, then refuses the offer."""

    async def whip(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path}")
        if request.method == "OPTIONS":
            return web.Response(status=204, headers={"Link": f'<{turn}>; rel="ice-server"'})
        return web.Response(status=403, text="no")

    app = web.Application()
    app.router.add_route("*", "/whip", whip)
    return app


async def test_ice_servers_the_endpoint_offers_pass_the_allow_list(astronaut: np.ndarray) -> None:
    """`Link: <turn:127.0.0.3:PORT?transport=tcp>; rel="ice-server"` from an endpoint allowed at 127.0.0.1:
    no entry names 127.0.0.3, so no TCP connection (and no TURN Allocate) goes there."""
    seen: list[str] = []
    async with Sink("127.0.0.3") as turn:
        runner = web.AppRunner(_steering_endpoint(f"turn:127.0.0.3:{turn.port}?transport=tcp", seen))
        await runner.setup()
        port = await start_site(runner)
        egress = EgressConfig(
            allowed_prefixes=(f"http://127.0.0.1:{port}/whip",), host_addresses=("127.0.0.1",)
        )
        config = replace(gw_config(), egress=replace(egress, retry=replace(egress.retry, max_attempts=1)))
        monitor = RecordingMonitor()
        try:
            async with (
                running_gateway(config, pipeline=FakePipeline(), monitor=monitor) as gw,
                aiohttp.ClientSession() as http,
            ):
                query = f"?processors=none&egress=http://127.0.0.1:{port}/whip"
                pub = await publish(http, gw.url, [cv2.resize(astronaut, (160, 120))], query=query)
                session_id = pub.location.rsplit("/", 1)[-1]
                try:
                    assert await wait_for(partial(_failed, monitor, session_id), 30), monitor.events
                finally:
                    await pub.close()
        finally:
            await runner.cleanup()
        assert seen == ["OPTIONS /whip", "POST /whip"]  # the endpoint was asked, and refused
        assert turn.connections == 0
