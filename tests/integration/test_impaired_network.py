"""The stream keeps flowing on an impaired link (issue 13, item 8): 3 % loss and 40 ms delay each way, and a
600 kbit/s bottleneck, applied to every datagram of the publisher's connection (loadgen.impair; the kernel
here has no sch_netem). Real aiortc peers on 127.0.0.1, the gateway unmodified."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import cv2
import numpy as np
from aiortc import RTCSessionDescription

from gateway.http.keys import sessions_of
from gateway.webrtc.install import create_peer_connection
from loadgen.impair import PROFILES, Impairment, impair_peer_connection
from tests.integration.conftest import (
    LOOPBACK,
    FakePipeline,
    StampedTrack,
    gw_config,
    read_id,
    running_gateway,
    source_query,
)

# Tighter than the benchmark's 600 kbit/s, on the downlink only (aiortc's publisher never sends under 250
# kbit/s): below the 500 kbit/s the encoder starts at, so it has to come down.
# Its queue holds 500 ms: the sender has no pacer, so a keyframe leaves in one burst (see the README).
BOTTLENECK = Impairment("bottleneck-250k", delay_ms=20, rate_kbps=250, queue_ms=500)


async def _run(
    astronaut: np.ndarray, profile: str | Impairment, seconds: float, directions: str = "both"
) -> dict[str, object]:
    image = cv2.resize(astronaut, (320, 240))
    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        query = await source_query(http, gw.url, image)
        pc = create_peer_connection(LOOPBACK)
        impairment = profile if isinstance(profile, Impairment) else PROFILES[profile]
        link = impair_peer_connection(pc, impairment, seed=7, directions=directions)
        track = StampedTrack([image], 15.0)
        transceiver = pc.addTransceiver(track, direction="sendrecv")
        await pc.setLocalDescription(await pc.createOffer())
        async with http.post(
            gw.url + "/whip" + query,
            data=pc.localDescription.sdp,
            headers={"Content-Type": "application/sdp"},
        ) as resp:
            assert resp.status == 201
            answer = await resp.text()
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
        (session,) = sessions_of(gw.app).sessions.values()
        arrivals: list[tuple[float, int]] = []

        async def consume() -> None:
            while True:
                frame = await transceiver.receiver.track.recv()
                fid = read_id(frame)  # type: ignore[arg-type]
                if fid is not None:
                    arrivals.append((time.monotonic(), fid))

        reader = asyncio.ensure_future(consume())
        start = time.monotonic()
        await asyncio.sleep(seconds)
        reader.cancel()
        async with http.get(gw.url + "/sessions") as resp:
            (listed,) = (await resp.json())["sessions"]
        async with http.get(gw.url + "/api/stats") as resp:
            stats = await resp.json()
        encoder = session.encoders["VP8"]
        gateway_buffer = session.pc.getReceivers()[0]._RTCRtpReceiver__jitter_buffer  # type: ignore[attr-defined]
        client_buffer = transceiver.receiver._RTCRtpReceiver__jitter_buffer  # type: ignore[attr-defined]
        result = {
            "start": start,
            "sent": len(track.sent),
            "arrivals": arrivals,
            "link": link.counters(),
            "bitrate": encoder.bitrate.snapshot(time.monotonic()),
            "gateway_recovery": gateway_buffer.recovery.counters,
            "client_recovery": client_buffer.recovery.counters,
            "frames_in": session.counters.frames_in,
            "listed": listed,
            "monitored": [x for x in stats["sessions"]["list"] if x["session_id"] == session.id],
        }
        track.stop()
        await pc.close()
    return result


def _longest_gap(arrivals: list[tuple[float, int]], start: float, end: float) -> float:
    times = [start] + [t for t, _ in arrivals] + [end]
    return max(b - a for a, b in zip(times, times[1:], strict=False))


async def test_stream_keeps_flowing_with_3_percent_loss_and_40ms_delay(astronaut: np.ndarray) -> None:
    result = await _run(astronaut, "loss3-delay40", 10.0)
    link = result["link"]
    assert link["outgoing"]["dropped_loss"] + link["incoming"]["dropped_loss"] >= 5, link  # it was impaired
    arrivals = result["arrivals"]
    ids = {fid for _, fid in arrivals}
    assert len(ids) >= 0.75 * result["sent"], (len(ids), result["sent"], result)
    start = result["start"]
    # never frozen longer than a NACK round or a keyframe round trip allow (was: 15-30 s, 1 run in 3)
    assert _longest_gap(arrivals, start + 1.5, start + 10.0) < 1.5, result
    assert result["frames_in"] >= 0.85 * result["sent"]  # the gateway's receive path recovered the uplink
    recovery = result["listed"]["receive_recovery"]  # what GET /sessions tells the operator
    assert set(recovery) == {"nacks_resent", "gaps_skipped", "keyframe_requests", "frames_held"}


async def test_encoder_bitrate_follows_a_bottleneck(astronaut: np.ndarray) -> None:
    result = await _run(astronaut, BOTTLENECK, 12.0, directions="incoming")
    bitrate = result["bitrate"]
    assert bitrate["changes"] >= 1 and bitrate["target_bps"] <= 300_000, bitrate  # started at 500 kbit/s
    arrivals = result["arrivals"]
    late = [fid for t, fid in arrivals if t > result["start"] + 8.0]
    assert len(late) >= 15, (len(late), bitrate, result["link"])  # flowing again at the lower rate
    assert result["listed"]["send_bitrate"]["VP8"]["target_bps"] == bitrate["target_bps"]


async def test_pli_from_a_viewer_makes_the_next_encoded_frame_a_keyframe(astronaut: np.ndarray) -> None:
    """Encode-once fan-out: the packets are encoded before any sender sees them, so a viewer's PLI must reach
    the encoder (FanoutEncoder.bind_sender) or a viewer that lost a keyframe would never recover."""
    import re

    from tests.integration.conftest import publish, view, wait_for

    image = cv2.resize(astronaut, (320, 240))
    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        publisher = await publish(http, gw.url, [image], query=await source_query(http, gw.url, image))
        session_id = publisher.location.rsplit("/", 1)[-1]
        viewer = await view(http, gw.url, session_id, publisher.sender_track.sent)  # type: ignore[union-attr]
        try:
            assert await wait_for(lambda: len(viewer.received.ids) >= 10, 20)
            encoder = sessions_of(gw.app).get(session_id).encoders["VP8"]
            # the first clean receiver reports lift the start rate to max (an encoder restart = a keyframe)
            assert await wait_for(lambda: encoder.bitrate.current_bps == 1_000_000, 10)
            await asyncio.sleep(0.5)
            keyframes: list[bool] = []
            publish_packets = encoder.publish

            def recording(packets: list) -> None:  # type: ignore[type-arg]
                keyframes.extend(p.is_keyframe for p in packets)
                publish_packets(packets)

            encoder.publish = recording  # type: ignore[method-assign]
            await asyncio.sleep(1.0)
            assert keyframes and not any(keyframes)  # steady state: inter frames only
            ssrc = int(re.findall(r"^a=ssrc:(\d+)", viewer.pc.remoteDescription.sdp, re.M)[0])
            keyframes.clear()
            await viewer.pc.getTransceivers()[0].receiver._send_rtcp_pli(ssrc)  # type: ignore[attr-defined]
            assert await wait_for(lambda: any(keyframes), 3.0), keyframes
            assert keyframes.index(True) <= 2  # the next frame or the one after (one may be in flight)
        finally:
            await viewer.close()
            await publisher.close()


async def test_a_filling_queue_brings_the_rate_down_before_anything_is_lost(astronaut: np.ndarray) -> None:
    """A bottleneck with a deep buffer (2 s at 350 kbit/s) drops nothing for seconds while its queue grows:
    the loss-based rule alone would keep sending 500 kbit/s into it until the buffer overflowed. The
    round trips in the client's receiver reports (LSR/DLSR) show the queue, and the rate comes down first."""
    deep = Impairment("deep-buffer-350k", delay_ms=10, rate_kbps=350, queue_ms=2000)
    result = await _run(astronaut, deep, 10.0, directions="incoming")
    bitrate = result["bitrate"]
    (receiver,) = bitrate["receivers"]  # type: ignore[index]
    assert receiver["rtt_ms"] is not None and receiver["queue_ms"] is not None, bitrate
    # The queue alone cut the rate below the 500 kbit/s start: the loss-based rate never moved from the top.
    # (Where in 350-500 it settles within 10 s depends on the encoder's output after each restart, which can
    # sit well under its target: one CI run ended at a 368 kbit/s target while sending 195.)
    assert receiver["loss_based_bps"] == 1_000_000, bitrate
    assert receiver["delay_based_bps"] < 500_000 and bitrate["target_bps"] < 500_000, bitrate
    assert bitrate["changes"] >= 1, bitrate
    assert result["link"]["incoming"]["dropped_queue"] == 0, result["link"]  # before any loss
    assert receiver["reverse_queue_ms"] is not None  # the publisher's uplink was measured too
    uplink = result["listed"]["uplink"]  # type: ignore[index]
    assert uplink["last_window"]["queue_ms"] is not None, uplink  # and its own cap reads that queue
    (monitored,) = result["monitored"]  # type: ignore[misc]
    # what the dashboard and Prometheus show of it (reported once a second: the rate may have moved since)
    assert 0 < monitored["send_kbps"] <= 500 and monitored["path_queue_ms"] is not None, monitored


async def test_the_bitrate_ceiling_follows_the_publishers_picture(astronaut: np.ndarray) -> None:
    """`--video-bitrate auto` (the default): a 640x360 publisher's processed stream gets libwebrtc's ceiling
    for that size, learnt from the frames on their way to the encoder, and GET /sessions says so."""
    from tests.integration.conftest import publish, wait_for

    image = cv2.resize(astronaut, (640, 360))
    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        publisher = await publish(http, gw.url, [image], query=await source_query(http, gw.url, image))
        try:
            assert await wait_for(lambda: len(publisher.received.ids) >= 5, 20)
            (session,) = sessions_of(gw.app).sessions.values()
            encoder = session.encoders["VP8"]
            assert encoder.bitrate.config.max_bps == 1_700_000
            async with http.get(gw.url + "/sessions") as resp:
                (listed,) = (await resp.json())["sessions"]
            assert listed["send_bitrate"]["VP8"]["ceiling_bps"] == 1_700_000
        finally:
            await publisher.close()
