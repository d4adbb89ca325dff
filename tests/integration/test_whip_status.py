"""WHIP/sources status codes, auth and admission, against a running gateway."""

from __future__ import annotations

import asyncio

import aiohttp
import cv2
import numpy as np

from gateway.auth import AuthConfig
from gateway.http.cors import CorsConfig
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish
from tests.harness.waiting import wait_for

NO_BUNDLE = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\n"


async def test_status_codes(astronaut: np.ndarray) -> None:
    from dataclasses import replace

    studio = "https://studio.example"
    config = replace(
        gw_config(max_sessions=1), auth=AuthConfig(token="s3cret"), cors=CorsConfig(origins=(studio,))
    )
    auth = {"Authorization": "Bearer s3cret"}
    async with (
        running_gateway(config, pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        u = gw.url
        async with http.options(u + "/whip", headers={"Origin": studio}) as r:
            assert r.status == 204 and r.headers["Accept-Post"] == "application/sdp"
            assert r.headers["Access-Control-Allow-Origin"] == studio
            assert "Authorization" in r.headers["Access-Control-Allow-Headers"]
        async with http.options(u + "/whip", headers={"Origin": "https://elsewhere.example"}) as r:
            assert r.status == 204 and "Access-Control-Allow-Origin" not in r.headers
        async with http.post(u + "/whip", data="v=0", headers={"Origin": studio}) as r:
            assert r.status == 401  # a refusal a page of that origin can read
            assert r.headers["Access-Control-Allow-Origin"] == studio
        async with http.post(u + "/whip", data="v=0", headers={"Content-Type": "application/sdp"}) as r:
            assert r.status == 401
        async with http.post(u + "/whip", data="v=0", headers={"Content-Type": "text/plain", **auth}) as r:
            assert r.status == 415
        async with http.post(
            u + "/whip", data=NO_BUNDLE, headers={"Content-Type": "application/sdp", **auth}
        ) as r:
            assert r.status == 400 and "\n" not in (await r.text()).strip()
        async with http.delete(u + "/whip/nope", headers=auth) as r:
            assert r.status == 404
        async with http.put(u + "/whip", headers=auth) as r:
            assert r.status == 405
        async with http.get(u + "/healthz") as r:
            assert r.status == 200
        async with http.get(u + "/readyz") as r:
            assert r.status == 200
        _, png = cv2.imencode(".png", cv2.cvtColor(astronaut, cv2.COLOR_RGB2BGR))
        async with http.post(
            u + "/sources", data=png.tobytes(), headers={"Content-Type": "image/png", **auth}
        ) as r:
            assert r.status == 201
            source = await r.json()
            assert source["faces"] == 1
        flat = cv2.imencode(".png", np.zeros((64, 64, 3), np.uint8))[1].tobytes()
        async with http.post(u + "/sources", data=flat, headers={"Content-Type": "image/png", **auth}) as r:
            assert r.status == 422
        async with http.post(
            u + "/sources", data=b"\x00" * 100, headers={"Content-Type": "image/png", **auth}
        ) as r:
            assert r.status == 415
        async with http.post(
            u + "/sources", data=b"x" * (9 * 1024 * 1024), headers={"Content-Type": "image/png", **auth}
        ) as r:
            assert r.status == 413
        pub = await publish(
            http, u, [cv2.resize(astronaut, (160, 120))], query=f"?source={source['id']}", headers=auth
        )
        try:
            session = pub.location.rsplit("/", 1)[-1]
            trickle = {"Content-Type": "application/trickle-ice-sdpfrag", **auth}
            async with http.patch(u + pub.location, data="a=end-of-candidates", headers=trickle) as r:
                assert r.status == 428  # If-Match (the ETag) is required
            async with http.patch(
                u + pub.location, data="a=end-of-candidates", headers={**trickle, "If-Match": '"nope"'}
            ) as r:
                assert r.status == 412
            async with http.patch(
                u + pub.location, data="a=end-of-candidates", headers={**auth, "If-Match": "*"}
            ) as r:
                assert r.status == 415
            async with http.patch(u + pub.location, data="hello", headers={**trickle, "If-Match": "*"}) as r:
                assert r.status == 400 and "fragment" in await r.text()
            restart = "a=ice-ufrag:brandnew\r\na=ice-pwd:0123456789abcdefghijkl\r\na=mid:0\r\n"
            async with http.patch(u + pub.location, data=restart, headers={**trickle, "If-Match": "*"}) as r:
                assert r.status == 422 and "ICE restart" in await r.text()
            async with http.get(f"{u}/sessions/{session}") as r:
                assert r.status == 404  # a session's details are its owner's
            async with http.get(f"{u}/sessions/{session}", headers=auth) as r:
                assert r.status == 200 and (await r.json())["source"] == source["id"]
            second = pub.pc.localDescription.sdp
            async with http.post(
                u + "/whip", data=second, headers={"Content-Type": "application/sdp", **auth}
            ) as r:
                assert r.status == 503 and "Retry-After" in r.headers
            async with http.delete(u + pub.location, headers=auth) as r:
                assert r.status == 200
        finally:
            await pub.close()


async def test_trickle_ice_candidates_arrive_by_patch(astronaut: np.ndarray) -> None:
    """A client that POSTs its offer before gathering (no candidates in it) and trickles them by PATCH."""
    import re

    from aiortc import RTCSessionDescription

    from gateway.http.keys import sessions_of
    from gateway.webrtc.install import create_peer_connection
    from loadgen.track import StampedVideoTrack
    from tests.harness.gateway import LOOPBACK
    from tests.harness.peers import Received, consume

    async with (
        running_gateway(gw_config(), pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        pc = create_peer_connection(LOOPBACK)
        track = StampedVideoTrack.from_rgb([cv2.resize(astronaut, (160, 120))], 15.0)
        transceiver = pc.addTransceiver(track, direction="sendrecv")
        received = Received()
        consumer: asyncio.Task[None] | None = None
        try:
            await pc.setLocalDescription(await pc.createOffer())
            full = pc.localDescription.sdp
            lines = full.splitlines()
            bare = "\r\n".join(x for x in lines if not x.startswith(("a=candidate:", "a=end-of-candidates")))
            async with http.post(
                gw.url + "/whip", data=bare + "\r\n", headers={"Content-Type": "application/sdp"}
            ) as r:
                assert r.status == 201
                location, etag, answer = r.headers["Location"], r.headers["ETag"], await r.text()
            await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
            consumer = asyncio.ensure_future(consume(transceiver.receiver.track, track.sent, received))
            ufrag = re.search(r"a=ice-ufrag:(\S+)", full).group(1)  # type: ignore[union-attr]
            pwd = re.search(r"a=ice-pwd:(\S+)", full).group(1)  # type: ignore[union-attr]
            cands = [x for x in lines if x.startswith("a=candidate:")]
            assert cands, "the client gathered candidates on 127.0.0.1"
            frag = (
                "\r\n".join(
                    [
                        f"a=ice-ufrag:{ufrag}",
                        f"a=ice-pwd:{pwd}",
                        "m=video 9 UDP/TLS/RTP/SAVPF 0",
                        "a=mid:0",
                        *cands,
                        "a=end-of-candidates",
                    ]
                )
                + "\r\n"
            )
            session = sessions_of(gw.app).get(location.rsplit("/", 1)[-1])
            ice = session.pc.getTransceivers()[0].receiver.transport.transport
            assert ice.getRemoteCandidates() == []  # the offer carried none
            async with http.patch(
                gw.url + location,
                data=frag,
                headers={"Content-Type": "application/trickle-ice-sdpfrag", "If-Match": etag},
            ) as r:
                assert r.status == 204, await r.text()
            remote = ice.getRemoteCandidates()
            assert remote and all(c.ip == "127.0.0.1" for c in remote)  # the trickled ones reached ICE
            assert await wait_for(lambda: len(received.ids) >= 5, 30)  # and the session streams
        finally:
            if consumer is not None:
                consumer.cancel()
            track.stop()
            await pc.close()
