"""Secrets, exposure and tenants.

Before: `?token=` was written to the access log; a connection sending blank lines stayed open for aiohttp's
75 s keep-alive; anonymous reads listed every session id; every holder of the one token could end, patch
or watch every session.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from pathlib import Path

import aiohttp
import cv2
import numpy as np
import pytest
from aiohttp import web

from gateway.app import create_app, wait_started
from gateway.auth import AuthConfig
from gateway.http.access_log import runner_options
from gateway.http.metrics_listener import MetricsListenerConfig
from gateway.tenants import Tenant, load_tenants
from gateway.webrtc.install import create_peer_connection
from loadgen.embedded import start_site
from tests.harness.fakes import FakePipeline
from tests.harness.gateway import LOOPBACK, gw_config
from tests.harness.peers import Received, consume, negotiate, publish
from tests.harness.waiting import wait_for

A = Tenant("acme", "acme-token-0123456789", max_sessions=1)
B = Tenant("beta", "beta-token-0123456789")
SDP = {"Content-Type": "application/sdp"}


def _bearer(t: Tenant) -> dict[str, str]:
    return {"Authorization": f"Bearer {t.token}"}


async def _serve(config: object) -> tuple[web.AppRunner, str, web.Application]:
    app = create_app(config, pipeline=FakePipeline())  # type: ignore[arg-type]
    runner = web.AppRunner(app, handle_signals=False, **runner_options(1.0))
    await runner.setup()
    port = await start_site(runner)
    await wait_started(app, 60)
    return runner, f"http://127.0.0.1:{port}", app


async def test_token_is_redacted_in_access_log_and_slowloris_is_cut(caplog: pytest.LogCaptureFixture) -> None:
    config = replace(gw_config(), auth=AuthConfig(token="legacy-secret-value"), body_timeout_s=1.0)
    runner, url, _ = await _serve(config)
    try:
        with caplog.at_level(logging.INFO, logger="aiohttp.access"):
            async with aiohttp.ClientSession() as http:
                async with http.get(url + "/api/stats?token=legacy-secret-value&x=1") as r:
                    assert r.status == 200
                egress = "egress=http://127.0.0.1:9/whip/stream-key-SECRET%3Fk%3DSECRET2&egress_token=SECRET3"
                referer = {"Referer": f"/?{egress}"}
                async with http.get(url + f"/api/stats?{egress}&x=2", headers=referer) as r:
                    assert r.status == 200
            await asyncio.sleep(0.1)
        lines = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]
        assert any("/api/stats?token=REDACTED&x=1" in ln for ln in lines), lines
        assert not any("legacy-secret-value" in ln for ln in lines)
        # an egress URL keeps its scheme, host and port (a stream key is in its path and query)
        expected = "?egress=http://127.0.0.1:9/REDACTED&egress_token=REDACTED&x=2"
        assert any(expected in ln for ln in lines), lines
        assert not any("SECRET" in ln for ln in lines), lines

        port = int(url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        t0 = time.monotonic()
        closed_after = None
        writer.write(b"GET /healthz HTTP/1.1\r\n")
        while time.monotonic() - t0 < 8:
            try:
                writer.write(b"X-a: b\r\n")
                await writer.drain()
                data = await asyncio.wait_for(reader.read(100), 0.3)
                if data == b"":
                    closed_after = time.monotonic() - t0
                    break
            except TimeoutError:
                continue
            except ConnectionError:
                closed_after = time.monotonic() - t0
                break
        writer.close()
        assert closed_after is not None and closed_after < 5.0, closed_after

        # a body dribbled in never completes: 408 after body_timeout_s (1 s here), not a handler held forever
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"POST /whip HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer legacy-secret-value\r\n"
            b"Content-Type: application/sdp\r\nContent-Length: 5000\r\n\r\nv=0\r\n"
        )
        await writer.drain()
        t0 = time.monotonic()
        status_line = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
        assert status_line.split()[1] == b"408" and time.monotonic() - t0 < 5.0, status_line
    finally:
        await runner.cleanup()


async def test_tenants_own_their_sessions_and_sources(astronaut: np.ndarray, tmp_path: Path) -> None:
    spec = tmp_path / "tenants.toml"
    spec.write_text(
        f'[tenants.acme]\ntoken = "{A.token}"\nmax_sessions = 1\n[tenants.beta]\ntoken = "{B.token}"\n'
    )
    tenants = load_tenants(spec)
    assert tenants == (A, B)
    # per-session series on, to see their session labels redacted for callers who may not see the ids
    config = replace(
        gw_config(), auth=AuthConfig(tenants=tenants), metrics=MetricsListenerConfig(per_session=True)
    )
    runner, url, _ = await _serve(config)
    frames = [cv2.resize(astronaut, (160, 120))]
    try:
        async with aiohttp.ClientSession() as http:
            ok, png = cv2.imencode(".png", frames[0])
            async with http.post(
                url + "/sources", data=png.tobytes(), headers={"Content-Type": "image/png", **_bearer(A)}
            ) as r:
                assert r.status == 201
                source = (await r.json())["id"]
            async with http.get(f"{url}/sources/{source}", headers=_bearer(B)) as r:
                assert r.status == 404
            async with http.delete(f"{url}/sources/{source}", headers=_bearer(B)) as r:
                assert r.status == 404
            pub = await publish(http, url, frames, query=f"?source={source}", headers=_bearer(A))
            try:
                sid = pub.location.rsplit("/", 1)[-1]
                assert await wait_for(lambda: len(pub.received.ids) >= 3, 30)
                # B cannot touch A's session, nor use A's source
                async with http.delete(url + pub.location, headers=_bearer(B)) as r:
                    assert r.status == 404
                trickle = {"Content-Type": "application/trickle-ice-sdpfrag", "If-Match": "*", **_bearer(B)}
                async with http.patch(url + pub.location, data="a=end-of-candidates", headers=trickle) as r:
                    assert r.status == 404
                async with http.get(f"{url}/sessions/{sid}", headers=_bearer(B)) as r:
                    assert r.status == 404
                async with http.post(
                    f"{url}/whep/{sid}", data=pub.pc.localDescription.sdp, headers={**SDP, **_bearer(B)}
                ) as r:
                    assert r.status == 404
                async with http.post(f"{url}/whep/{sid}", data=pub.pc.localDescription.sdp, headers=SDP) as r:
                    assert r.status == 401
                with pytest.raises(AssertionError, match="404"):
                    await publish(http, url, frames, query=f"?source={source}", headers=_bearer(B))
                # A's limit is one session; B is not limited by it
                with pytest.raises(AssertionError, match="503"):
                    await publish(http, url, frames, headers=_bearer(A))
                other = await publish(http, url, frames, headers=_bearer(B))
                await other.close()
                # listings: each tenant its own; anonymous callers only counts, never ids
                async with http.get(url + "/sessions", headers=_bearer(A)) as r:
                    assert [s["id"] for s in (await r.json())["sessions"]] == [sid]
                async with http.get(url + "/sessions", headers=_bearer(B)) as r:
                    assert sid not in await r.text()
                async with http.get(url + "/sessions") as r:
                    body = await r.json()
                    assert body["sessions"] == [] and body["open"] >= 1 and sid not in await r.text()
                async with http.get(url + "/api/stats") as r:
                    text = await r.text()
                    assert r.status == 200 and sid not in text and source not in text
                async with http.get(url + "/api/stats", headers=_bearer(A)) as r:
                    assert sid in await r.text()
                async with http.get(url + "/metrics") as r:
                    text = await r.text()
                    assert r.status == 200 and sid not in text and "redacted-1" in text, text[-800:]
                async with http.get(url + "/metrics", headers=_bearer(A)) as r:
                    assert sid in await r.text()
            finally:
                await pub.close()
    finally:
        await runner.cleanup()


async def test_viewer_token_allows_watching_one_session(astronaut: np.ndarray) -> None:
    config = replace(gw_config(), auth=AuthConfig(tenants=(A, B)))
    runner, url, app = await _serve(config)
    frames = [cv2.resize(astronaut, (160, 120))]
    try:
        async with aiohttp.ClientSession() as http:
            pub = await publish(http, url, frames, headers=_bearer(A))
            try:
                from gateway.http.keys import STATE

                sid = pub.location.rsplit("/", 1)[-1]
                token = app[STATE].sessions.get(sid).viewer_token  # type: ignore[union-attr]
                # the publisher is told its session's viewer token with the 201
                probe = create_peer_connection(LOOPBACK)
                probe.addTransceiver("video", direction="sendrecv")
                await probe.setLocalDescription(await probe.createOffer())
                async with http.post(
                    url + "/whip", data=probe.localDescription.sdp, headers={**SDP, **_bearer(B)}
                ) as r:
                    assert r.status == 201
                    other_token = r.headers["Livefuse-Viewer-Token"]
                    assert len(other_token) >= 24 and other_token != token
                    async with http.delete(url + r.headers["Location"], headers=_bearer(B)) as d:
                        assert d.status == 200
                await probe.close()
                pc = create_peer_connection(LOOPBACK)
                transceiver = pc.addTransceiver("video", direction="recvonly")
                try:
                    status, body, _ = await negotiate(
                        http, f"{url}/whep/{sid}", pc, {"Authorization": f"Bearer {token}"}
                    )
                    assert status == 201, body
                    received = Received()
                    task = asyncio.ensure_future(consume(transceiver.receiver.track, None, received))
                    assert await wait_for(lambda: len(received.sizes) >= 3, 30)
                    task.cancel()
                finally:
                    await pc.close()
                async with http.delete(url + pub.location, headers={"Authorization": f"Bearer {token}"}) as r:
                    assert r.status == 401  # a viewer token is for WHEP only
            finally:
                await pub.close()
    finally:
        await runner.cleanup()


def test_malformed_request_tracebacks_stay_out_of_the_log() -> None:
    from aiohttp.http_exceptions import BadHttpMessage, LineTooLong

    from gateway.http.access_log import MalformedRequestFilter

    def record(exc: BaseException) -> logging.LogRecord:
        return logging.LogRecord(
            "aiohttp.server", logging.ERROR, "x", 1, "Error handling request", (), (type(exc), exc, None)
        )

    flt = MalformedRequestFilter()
    assert not flt.filter(record(LineTooLong(b"aaa", 8190)))
    assert not flt.filter(record(BadHttpMessage("Invalid character in Content-Length")))
    assert flt.filter(record(RuntimeError("a real bug")))  # real server errors still logged


def test_tenants_file_errors_and_cli(tmp_path: Path) -> None:
    from gateway.cli import build_config, build_parser

    bad = {
        "short": '[tenants.a]\ntoken = "short"\n',
        "shared": f'[tenants.a]\ntoken = "{A.token}"\n[tenants.b]\ntoken = "{A.token}"\n',
        "unknown key": f'[tenants.a]\ntoken = "{A.token}"\nrole = "x"\n',
        "no tenants": 'title = "x"\n',
    }
    for name, text in bad.items():
        path = tmp_path / f"{name.replace(' ', '_')}.toml"
        path.write_text(text)
        with pytest.raises(ValueError):
            load_tenants(path)
    good = tmp_path / "good.toml"
    good.write_text(
        f'[tenants.acme]\ntoken = "{A.token}"\nmax_sessions = 1\n[tenants.ops]\n'
        f'token = "{B.token}"\nadmin = true\n'
    )
    args = build_parser().parse_args(
        [
            "--tenants-file",
            str(good),
            "--token",
            "legacy",
            "--max-pending",
            "2",
            "--max-sources",
            "3",
            "--header-timeout-s",
            "4",
        ]
    )
    config = build_config(args)
    assert [t.name for t in config.auth.all_tenants] == ["default", "acme", "ops"]
    assert config.auth.all_tenants[0].admin and config.auth.all_tenants[2].admin
    assert config.sessions.max_pending == 2 and config.sources.max_sources == 3
    assert config.header_timeout_s == 4.0
