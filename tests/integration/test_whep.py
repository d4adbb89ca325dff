"""WHEP: a viewer receives the same processed stream as the publisher (encoded once, fanned out)."""

from __future__ import annotations

import aiohttp
import cv2
import numpy as np

from gateway.http.keys import sessions_of
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish, source_query, view
from tests.harness.waiting import wait_for


async def test_viewer_gets_the_processed_stream(astronaut: np.ndarray) -> None:
    async with (
        running_gateway(gw_config(), pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        query = await source_query(http, gw.url, astronaut)
        pub = await publish(http, gw.url, [cv2.resize(astronaut, (320, 240))], query=query)
        session_id = pub.location.rsplit("/", 1)[-1]
        try:
            assert await wait_for(lambda: len(pub.received.ids) >= 5, 30)
            viewer = await view(http, gw.url, session_id, None)
            try:
                assert await wait_for(lambda: len(viewer.received.ids) >= 10, 20)  # keyframe came promptly
                ids = viewer.received.ids
                assert ids == sorted(ids)
                assert set(ids) & set(pub.received.ids), "viewer and publisher see the same frames"
                r, g, _ = viewer.received.frames[-1][5:40, 5:40].mean(axis=(0, 1))
                assert r > 180 and g < 50  # the fake pipeline's magenta block: processed, not raw
                session = sessions_of(gw.app).get(session_id)
                assert session.encoders["VP8"].subscribers == 2  # one encoder, two subscribers
                assert len(session.viewers) == 1
            finally:
                await viewer.close()
            async with http.delete(gw.url + pub.location) as resp:
                assert resp.status == 200
            async with http.post(
                f"{gw.url}/whep/{session_id}", data="v=0\r\n", headers={"Content-Type": "application/sdp"}
            ) as resp:
                assert resp.status == 404
        finally:
            await pub.close()


async def test_h264_only_publisher_and_a_vp8_viewer(astronaut: np.ndarray) -> None:
    """OBS-style publishers offer H.264 only: the answer uses H.264 for them, while a browser viewer of the
    same session gets VP8 — one encoder per codec in use, each fanned out."""
    async with (
        running_gateway(gw_config(), pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        query = await source_query(http, gw.url, astronaut)
        pub = await publish(http, gw.url, [cv2.resize(astronaut, (320, 240))], query=query, codec="H264")
        session_id = pub.location.rsplit("/", 1)[-1]
        try:
            assert await wait_for(lambda: len(set(pub.received.ids)) >= 10, 30)
            ids = pub.received.ids
            assert ids == sorted(ids)  # in order; a late frame may repeat the last picture (the late policy)
            r, g, _ = pub.received.frames[-1][5:40, 5:40].mean(axis=(0, 1))
            assert r > 180 and g < 50  # processed frames came back over H.264
            assert "H264" in pub.pc.remoteDescription.sdp and "VP8" not in pub.pc.remoteDescription.sdp
            viewer = await view(http, gw.url, session_id, None)
            try:
                assert await wait_for(lambda: len(viewer.received.ids) >= 10, 20)
                session = sessions_of(gw.app).get(session_id)
                assert set(session.encoders) == {"H264", "VP8"}
                assert session.encoders["H264"].subscribers == 1 and session.encoders["VP8"].subscribers == 1
            finally:
                await viewer.close()
        finally:
            await pub.close()
