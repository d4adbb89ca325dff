"""POST /sources against the real detector: every accepted image type, and each way an upload is refused."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace

import aiohttp
import cv2
import numpy as np

from tests.harness.gateway import gw_config, running_gateway

LIMIT = 400_000


def _encode(rgb: np.ndarray, ext: str) -> bytes:
    ok, buf = cv2.imencode(ext, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    assert ok
    return buf.tobytes()


async def test_source_uploads(astronaut: np.ndarray, group_photo: np.ndarray, model_store: object) -> None:
    config = replace(gw_config(), max_body_bytes=LIMIT)
    async with running_gateway(config) as gw, aiohttp.ClientSession() as http:
        url = gw.url + "/sources"

        async def post(body: bytes, ctype: str) -> tuple[int, str]:
            async with http.post(url, data=body, headers={"Content-Type": ctype}) as r:
                return r.status, await r.text()

        small = cv2.resize(astronaut, (256, 256))
        ids = []
        for ext, ctype in ((".png", "image/png"), (".jpg", "image/jpeg"), (".webp", "image/webp")):
            status, text = await post(_encode(small, ext), ctype)
            assert status == 201, (ctype, text)
            ids.append(json.loads(text)["id"])
            async with http.get(f"{url}/{ids[-1]}") as r:
                assert r.status == 200 and (await r.json())["faces"] == 1
        status, text = await post(_encode(cv2.resize(group_photo, (640, 360)), ".jpg"), "image/jpeg")
        assert status == 201 and json.loads(text)["faces"] >= 4, text

        # a real picture without a face: the detector finds nothing -> 422
        sky = np.zeros((240, 320, 3), np.uint8)
        sky[:] = (90, 140, 220)
        sky[100:140, 50:270] = (240, 240, 240)
        status, text = await post(_encode(sky, ".png"), "image/png")
        assert status == 422 and "no face" in text and text.count("\n") == 1

        # not an image: wrong Content-Type, or bytes that do not decode
        assert (await post(b"hello", "text/plain"))[0] == 415
        status, text = await post(b"\x89PNG\r\n\x1a\n not really a png", "image/png")
        assert status == 415 and text.count("\n") == 1

        # over the limit: both with a Content-Length and chunked (no length known up front)
        big = np.random.default_rng(0).integers(0, 255, (400, 400, 3), np.uint8)
        big_png = _encode(big, ".png")
        assert len(big_png) > LIMIT
        status, text = await post(big_png, "image/png")
        assert status == 413 and text.count("\n") == 1

        async def chunks() -> AsyncIterator[bytes]:
            for i in range(0, len(big_png), 65536):
                yield big_png[i : i + 65536]

        async with http.post(url, data=chunks(), headers={"Content-Type": "image/png"}) as r:
            assert r.status == 413

        # unknown ids: GET, DELETE, and a WHIP offer naming one
        async with http.get(url + "/nope") as r:
            assert r.status == 404
        async with http.delete(url + "/nope") as r:
            assert r.status == 404
        async with http.post(
            gw.url + "/whip?source=nope", data="v=0\r\n", headers={"Content-Type": "application/sdp"}
        ) as r:
            assert r.status == 404 and "nope" in await r.text()
        async with http.delete(f"{url}/{ids[0]}") as r:
            assert r.status == 204
        async with http.get(f"{url}/{ids[0]}") as r:
            assert r.status == 404
