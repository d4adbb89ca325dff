"""The front process's app (gateway.front.app), in-process, in front of a recording stand-in for the media
process on a real Unix socket: what it refuses never reaches the media; what passes arrives unchanged."""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from gateway.auth import AuthConfig
from gateway.front.app import DRAINING, REJECTS, create_front_app
from gateway.front.config import FrontConfig, front_config
from gateway.http.rate_limit import RateLimitConfig
from tests.harness.sdp import CHROMIUM_OFFER

TOKEN = "front-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ROUTES = (
    ("GET", "/healthz"),
    ("POST", "/whip"),
    ("PATCH", "/whip/{session_id}"),
    ("DELETE", "/whip/{session_id}"),
    ("POST", "/whep/{session_id}"),
    ("POST", "/sources"),
    ("PATCH", "/sessions/{session_id}"),
    ("POST", "/sessions/{session_id}/egress"),
    ("GET", "/api/stream"),
    ("GET", "/metrics"),
    ("HEAD", "/metrics"),
)


@dataclass
class Media:
    """What the media process was asked: (method, path with query, headers, body)."""

    seen: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append((request.method, request.path_qs, dict(request.headers), body))
        if request.path == "/api/stream":
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for n in range(3):
                await response.write(f"data: {n}\n\n".encode())
                await asyncio.sleep(0.01)
            return response
        if request.path == "/whip" and request.method == "POST":
            response = web.Response(
                status=201, text="answer", content_type="application/sdp", headers={"Location": "/whip/abc"}
            )
            for link in ("<stun:a.example>; rel=ice-server", "<turn:b.example>; rel=ice-server"):
                response.headers.add("Link", link)
            return response
        return web.Response(text="media " + request.method, headers={"X-Media": "1"})


def _config(**changes: object) -> FrontConfig:
    base = FrontConfig(
        routes=ROUTES,
        auth=AuthConfig(token=TOKEN),
        rate_limit=RateLimitConfig(rate_per_s=0),
        max_body_bytes=1 << 20,
        max_sdp_bytes=64 * 1024,
        max_pixels=4_000_000,
        header_timeout_s=5.0,
        body_timeout_s=5.0,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.fixture
async def media(tmp_path: Path) -> AsyncIterator[tuple[Media, str]]:
    recorder = Media()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    path = str(tmp_path / "media.sock")
    await web.UnixSite(runner, path).start()
    try:
        yield recorder, path
    finally:
        await runner.cleanup()


async def _front(
    media_socket: str, config: FrontConfig | None = None
) -> TestClient[web.Request, web.Application]:
    client = TestClient(TestServer(create_front_app(config or _config(), media_socket), host="127.0.0.1"))
    await client.start_server()
    return client


def _png(width: int, height: int) -> bytes:
    """A PNG whose header declares width x height (only the header is read before forwarding)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))


async def test_a_valid_offer_is_forwarded_whole_with_its_token_and_the_answer_comes_back(
    media: tuple[Media, str],
) -> None:
    recorder, path = media
    async with await _front(path) as client:
        headers = {**AUTH, "Content-Type": "application/sdp"}
        resp = await client.post("/whip?processors=none", data=CHROMIUM_OFFER, headers=headers)
        assert resp.status == 201
        assert await resp.text() == "answer"
        assert resp.headers["Location"] == "/whip/abc"
        assert len(resp.headers.getall("Link")) == 2  # repeated headers (ICE servers) keep every value
    [(method, path_qs, sent, body)] = recorder.seen
    assert (method, path_qs, body) == ("POST", "/whip?processors=none", CHROMIUM_OFFER.encode())
    assert sent["Authorization"] == f"Bearer {TOKEN}" and sent["Content-Type"] == "application/sdp"


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "status"),
    [
        ("POST", "/whip", {}, CHROMIUM_OFFER, 401),  # no token
        ("POST", "/whip", {"Authorization": "Bearer wrong"}, CHROMIUM_OFFER, 401),
        ("GET", "/nowhere", AUTH, b"", 404),
        ("PUT", "/whip", AUTH, b"", 405),
        ("POST", "/whip", {**AUTH, "Content-Type": "text/plain"}, CHROMIUM_OFFER, 415),
        ("POST", "/whip", {**AUTH, "Content-Type": "application/sdp"}, "v=0\r\n", 400),
        ("POST", "/whip", {**AUTH, "Content-Type": "application/sdp"}, b"\xff\xfe", 400),
        ("POST", "/whip", {**AUTH, "Content-Type": "application/sdp"}, "v=0\r\n" + "a=x\r\n" * 20000, 400),
        ("POST", "/whep/abc", {**AUTH, "Content-Type": "application/sdp"}, "m=video junk", 400),
        ("PATCH", "/whip/abc", {**AUTH, "Content-Type": "application/sdp"}, b"a=x", 415),
        ("PATCH", "/whip/abc", {**AUTH, "Content-Type": "application/trickle-ice-sdpfrag"}, b"a=x", 428),
        (
            "PATCH",
            "/whip/abc",
            {**AUTH, "Content-Type": "application/trickle-ice-sdpfrag", "If-Match": "*"},
            b"a=candidate:garbage",
            400,
        ),
        ("POST", "/sources", {**AUTH, "Content-Type": "image/gif"}, b"GIF89a", 415),
        ("POST", "/sources", {**AUTH, "Content-Type": "image/png"}, b"not an image", 415),
        ("POST", "/sources", {**AUTH, "Content-Type": "image/png"}, _png(65535, 65535), 413),
        ("POST", "/sources", {**AUTH, "Content-Type": "image/png"}, b"\0" * (2 << 20), 413),
    ],
)
async def test_what_the_front_refuses_never_reaches_the_media_process(
    media: tuple[Media, str], method: str, path: str, headers: dict[str, str], body: bytes | str, status: int
) -> None:
    recorder, socket_path = media
    async with await _front(socket_path) as client:
        resp = await client.request(method, path, headers=headers, data=body)
        assert resp.status == status, await resp.text()
        text = await resp.text()
        assert text.endswith("\n") and text.count("\n") == 1  # one line, never a traceback
        if status == 405:
            assert "POST" in resp.headers["Allow"]
    assert recorder.seen == []


async def test_refusals_are_counted_by_reason_for_the_media_process_monitor(media: tuple[Media, str]) -> None:
    _, path = media
    config = _config(rate_limit=RateLimitConfig(rate_per_s=0.001, burst=3))
    async with await _front(path, config) as client:
        sdp = {**AUTH, "Content-Type": "application/sdp"}
        statuses = [
            (await client.post("/whip", data="v=0\r\n", headers=sdp)).status,
            (await client.post("/whip", data=CHROMIUM_OFFER)).status,
            (await client.get("/healthz")).status,
            (await client.get("/healthz")).status,
        ]
        assert statuses == [400, 401, 200, 429]
        assert dict(client.app[REJECTS]) == {"bad_request": 1, "auth": 1, "rate_limit": 1}


async def test_a_body_on_a_route_that_reads_none_stays_in_the_front(media: tuple[Media, str]) -> None:
    recorder, path = media
    async with await _front(path) as client:
        resp = await client.delete("/whip/abc", data=b"x" * 500_000, headers=AUTH)
        assert resp.status == 200 and resp.headers["X-Media"] == "1"
    [(method, _, sent, body)] = recorder.seen
    assert (
        method == "DELETE" and body == b"" and "Content-Length" not in sent or sent["Content-Length"] == "0"
    )


async def test_a_small_valid_image_is_forwarded(media: tuple[Media, str]) -> None:
    recorder, path = media
    image = _png(640, 480)
    async with await _front(path) as client:
        resp = await client.post("/sources", data=image, headers={**AUTH, "Content-Type": "image/png"})
        assert resp.status == 200
    assert [(m, b) for m, _, _, b in recorder.seen] == [("POST", image)]


async def test_live_control_and_egress_json_is_forwarded_and_what_is_not_a_json_object_stays(
    media: tuple[Media, str],
) -> None:
    recorder, path = media
    change = b'{"faces": "one"}'
    target = b'{"url": "https://sfu.example/whip"}'
    json_type = {**AUTH, "Content-Type": "application/json"}
    async with await _front(path) as client:
        resp = await client.patch("/sessions/abc", data=change, headers=json_type)
        assert resp.status == 200
        resp = await client.post("/sessions/abc/egress", data=target, headers=json_type)
        assert resp.status == 200
        for bad in (b"[1, 2]", b"{nope", b"x" * 20_000):
            resp = await client.patch("/sessions/abc", data=bad, headers=json_type)
            assert resp.status in (400, 413) and "\n" not in (await resp.text()).strip()
    assert [(m, p, b) for m, p, _, b in recorder.seen] == [
        ("PATCH", "/sessions/abc", change),
        ("POST", "/sessions/abc/egress", target),
    ]


async def test_server_sent_events_stream_through_and_head_has_no_body(media: tuple[Media, str]) -> None:
    _, path = media
    async with await _front(path) as client:
        resp = await client.get("/api/stream")
        assert resp.headers["Content-Type"] == "text/event-stream"
        assert await resp.text() == "data: 0\n\ndata: 1\n\ndata: 2\n\n"
        head = await client.head("/metrics")
        assert head.status == 200 and await head.read() == b""


async def test_while_draining_new_sessions_get_503_whatever_their_body(media: tuple[Media, str]) -> None:
    recorder, path = media
    async with await _front(path) as client:
        client.app[DRAINING].append(True)
        resp = await client.post("/whip", data="v=0\r\n", headers={**AUTH, "Content-Type": "application/sdp"})
        assert resp.status == 503 and "Retry-After" in resp.headers
        assert "shutting down" in await resp.text()
        assert (await client.get("/healthz")).status == 200  # reads still pass
    assert [m for m, *_ in recorder.seen] == ["GET"]


async def test_a_media_process_that_does_not_answer_is_a_503_not_a_traceback(tmp_path: Path) -> None:
    async with await _front(str(tmp_path / "nobody.sock")) as client:
        resp = await client.get("/healthz")
        assert resp.status == 503 and "Retry-After" in resp.headers
        assert await resp.text() == "the media process is not answering\n"


def test_the_front_routes_exactly_what_the_media_app_answers(tmp_path: Path) -> None:
    from gateway.app import create_app
    from gateway.config import GatewayConfig
    from gateway.listening import routes_of

    config = GatewayConfig(front_process=True)
    media = create_app(config)
    front = create_front_app(front_config(config, routes_of(media)), str(tmp_path / "media.sock"))
    answered = set(routes_of(media))
    assert set(routes_of(front)) == answered
    assert {("POST", "/whip"), ("PATCH", "/whip/{session_id}"), ("GET", "/api/stream")} <= answered
