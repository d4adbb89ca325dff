"""A session's way on air (gateway.session.timeline): every step from the WHIP POST to the first processed
frame sent is marked once, in the order a session meets them, and the first frame out is an event."""

from __future__ import annotations

import asyncio

import aiohttp
import cv2
import numpy as np
from aiortc import RTCSessionDescription

from gateway.session.timeline import ANSWER, DTLS, FRAME_IN, FRAME_OUT, ICE
from gateway.webrtc.install import create_peer_connection
from loadgen.track import StampedVideoTrack
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import LOOPBACK, gw_config, running_gateway
from tests.harness.peers import Received, consume
from tests.harness.waiting import wait_for


async def test_a_session_marks_its_way_on_air_in_order(astronaut: np.ndarray) -> None:
    monitor = RecordingMonitor()
    async with (
        running_gateway(gw_config(), pipeline=FakePipeline(), monitor=monitor) as gw,
        aiohttp.ClientSession() as http,
    ):
        pc = create_peer_connection(LOOPBACK)
        track = StampedVideoTrack.from_rgb([cv2.resize(astronaut, (320, 240))], 15.0)
        transceiver = pc.addTransceiver(track, direction="sendrecv")
        received = Received()
        task: asyncio.Task[None] | None = None
        try:
            await pc.setLocalDescription(await pc.createOffer())
            async with http.post(
                gw.url + "/whip?processors=none",
                data=pc.localDescription.sdp,
                headers={"Content-Type": "application/sdp"},
            ) as resp:
                assert resp.status == 201
                answer = await resp.text()
                session_id = resp.headers["Location"].rsplit("/", 1)[-1]
            await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
            task = asyncio.ensure_future(consume(transceiver.receiver.track, track.sent, received))
            assert await wait_for(lambda: len(received.ids) >= 3, 30), pc.connectionState
            assert await wait_for(lambda: FRAME_OUT in monitor.timelines.get(session_id, {}), 10)

            marks = monitor.timelines[session_id]
            order = [ANSWER, ICE, DTLS, FRAME_IN, FRAME_OUT]
            assert [name for name in marks if name in order] == order
            times = [marks[name] for name in order]
            assert times == sorted(times) and times[0] >= 0.0
            on_air = [data for kind, _, data in monitor.events if kind == "session_on_air"]
            assert len(on_air) == 1 and on_air[0]["session_id"] == session_id
            assert on_air[0]["timeline"] == {k: v for k, v in marks.items() if k in on_air[0]["timeline"]}
        finally:
            if task is not None:
                task.cancel()
            track.stop()
            await pc.close()
