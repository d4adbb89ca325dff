"""WHIP/sources status codes, auth and admission, against a running gateway."""

from __future__ import annotations

import aiohttp
import cv2
import numpy as np

from gateway.auth import AuthConfig
from tests.integration.conftest import FakePipeline, RecordingMonitor, gw_config, publish, running_gateway

NO_BUNDLE = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\n"


async def test_status_codes(astronaut: np.ndarray) -> None:
    from dataclasses import replace

    config = replace(gw_config(max_sessions=1), auth=AuthConfig(token="s3cret"))
    auth = {"Authorization": "Bearer s3cret"}
    async with (
        running_gateway(config, pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        u = gw.url
        async with http.options(u + "/whip") as r:
            assert r.status == 204 and r.headers["Accept-Post"] == "application/sdp"
            assert "Access-Control-Allow-Origin" in r.headers
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
            async with http.patch(
                u + pub.location,
                data="a=x",
                headers={"Content-Type": "application/trickle-ice-sdpfrag", **auth},
            ) as r:
                assert r.status == 501 and "trickle" in await r.text()
            async with http.get(f"{u}/sessions/{session}") as r:
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
