"""Transport-cc towards publishers (gateway.webrtc.congestion.transport_cc): an offer with the transport-wide
sequence
number extension and `transport-cc` feedback gets both back in the answer, and the gateway reports every
stamped packet's arrival in transport-cc feedback packets (the format libwebrtc's congestion control reads).

aiortc's own sender does not stamp transport-wide sequence numbers, so the publisher here stamps them on its
way out (its DTLS transport's `_send_rtp`, before SRTP) and reads the feedback on its way in, as a browser
would. Real peers on 127.0.0.1, the gateway unmodified."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from pathlib import Path

import aiohttp
import cv2
import numpy as np
import pytest
from aiortc import RTCPeerConnection, RTCRtpReceiver, RTCSessionDescription
from aiortc.rtcrtpparameters import RTCRtpHeaderExtensionParameters, RTCRtpParameters
from aiortc.rtp import HeaderExtensionsMap, RtpPacket, is_rtcp

from gateway.http.keys import sessions_of
from gateway.webrtc.congestion import transport_cc
from gateway.webrtc.congestion.transport_cc import TRANSPORT_CC_URI, transport_feedback_packets
from gateway.webrtc.congestion.transport_feedback import TransportFeedback, parse_feedback
from gateway.webrtc.install import create_peer_connection
from loadgen.client import ClientConfig, WhipJob
from loadgen.impair import Impairment, impair_peer_connection
from loadgen.synth import SynthConfig, build_loop
from loadgen.transport_cc import answered_id, offer_with_transport_cc, parse_transport_cc
from tests.integration.conftest import (
    LOOPBACK,
    FakePipeline,
    StampedTrack,
    gw_config,
    publish,
    running_gateway,
    wait_for,
)


class Stamper:
    """The publisher's side: a transport-wide sequence number on every RTP packet it sends, and the
    transport-cc feedback packets it receives."""

    def __init__(self, pc: RTCPeerConnection, offer: str) -> None:
        """`offer`: what was sent, browser-like (with transport-cc): its extension ids are the ones stamped,
        whether or not the answer took them."""
        transport = pc.getTransceivers()[0].sender.transport
        ids = {uri: int(i) for i, uri in re.findall(r"a=extmap:(\d+)(?:/\w+)? (\S+)", offer)}
        self.extensions = HeaderExtensionsMap()
        self.extensions.configure(
            RTCRtpParameters(
                headerExtensions=[RTCRtpHeaderExtensionParameters(id=i, uri=u) for u, i in ids.items()]
            )
        )
        self.sent: dict[int, float] = {}
        self.feedback: list[TransportFeedback] = []
        counter = itertools.count()
        send_rtp, handle_rtcp = transport._send_rtp, transport._handle_rtcp_data

        async def send(data: bytes) -> None:
            if not is_rtcp(data):
                packet = RtpPacket.parse(data, self.extensions)
                sequence = next(counter) & 0xFFFF
                packet.extensions.transport_sequence_number = sequence
                self.sent[sequence] = time.monotonic()
                data = packet.serialize(self.extensions)
            await send_rtp(data)

        async def handle(data: bytes) -> None:
            self.feedback += [parse_feedback(raw) for raw in transport_feedback_packets(data)]
            await handle_rtcp(data)

        transport._send_rtp = send
        transport._handle_rtcp_data = handle


async def post_offer(http: aiohttp.ClientSession, url: str, pc: RTCPeerConnection, offer: str) -> str:
    """POST `offer` (as munged) to a WHIP/WHEP URL, expect 201, apply the answer; the answer."""
    async with http.post(url, data=offer, headers={"Content-Type": "application/sdp"}) as resp:
        assert resp.status == 201, await resp.text()
        answer = await resp.text()
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
    return answer


async def _publish(offer_tcc: bool, enabled: bool, seconds: float) -> tuple[str, Stamper, dict[str, object]]:
    image = cv2.resize(np.full((240, 320, 3), 90, np.uint8), (320, 240))
    async with (
        running_gateway(gw_config(transport_cc=enabled), pipeline=FakePipeline()) as gw,
        aiohttp.ClientSession() as http,
    ):
        pc = create_peer_connection(LOOPBACK)
        track = StampedTrack([image], 15.0)
        pc.addTransceiver(track, direction="sendrecv")
        await pc.setLocalDescription(await pc.createOffer())
        browser_like = offer_with_transport_cc(pc.localDescription.sdp)
        offer = browser_like if offer_tcc else pc.localDescription.sdp
        answer = await post_offer(http, gw.url + "/whip", pc, offer)
        stamper = Stamper(pc, browser_like)
        (session,) = sessions_of(gw.app).sessions.values()
        try:
            assert await wait_for(lambda: session.counters.frames_in >= 3, 20)
            await asyncio.sleep(seconds)
            summary = session.summary()
        finally:
            track.stop()
            await pc.close()
    return answer, stamper, summary


async def test_every_stamped_packet_is_reported_with_its_arrival_time() -> None:
    answer, stamper, summary = await _publish(offer_tcc=True, enabled=True, seconds=2.0)
    assert answered_id(answer) is not None  # the extension and the feedback, on the video m-line

    reported = {seq: at for fb in stamper.feedback for seq, at in fb.arrivals}
    received = {seq: at for seq, at in reported.items() if at is not None}
    assert len(stamper.feedback) >= 10  # every 50 ms while packets arrive
    # all but the last interval's packets are reported, each once, none lost on a clean loopback
    assert len(received) >= 0.9 * len(stamper.sent) and len(reported) == len(received)
    assert set(received) <= set(stamper.sent)
    # the reported arrivals keep the spacing the packets were sent with (a clean link: a few ms of jitter)
    first, last = min(received), max(received)
    sent_span = stamper.sent[last] - stamper.sent[first]
    arrival_span = (received[last] - received[first]) / 1e6
    assert sent_span > 1.0 and abs(arrival_span - sent_span) < 0.1
    assert [fb.feedback_count for fb in stamper.feedback[:5]] == list(range(5))
    stats = summary["transport_cc"]
    # (the summary was taken before the publisher stopped: a few more may have arrived since)
    assert isinstance(stats, dict) and stats["feedback_sent"] >= 0.9 * len(stamper.feedback)


@pytest.mark.parametrize(("offer_tcc", "enabled"), [(False, True), (True, False)])
async def test_no_transport_cc_unless_offered_and_enabled(offer_tcc: bool, enabled: bool) -> None:
    answer, stamper, summary = await _publish(offer_tcc=offer_tcc, enabled=enabled, seconds=1.0)
    assert "transport-cc" not in answer and TRANSPORT_CC_URI not in answer
    assert stamper.feedback == [] and summary["transport_cc"] is None


async def _receive_with_feedback(
    astronaut: np.ndarray, seconds: float, impairment: Impairment | None = None
) -> tuple[list[int], dict[str, object], dict[str, object]]:
    """A publisher that offers transport-cc and sends transport-cc feedback for the processed stream it gets
    back (as a browser does): the transport-wide sequence numbers it saw, the session summary and the
    encoder's bitrate snapshot. The picture pans, so the encoder has work at every frame."""
    base = cv2.resize(astronaut, (320, 240))
    images = [np.roll(base, 4 * k, axis=1) for k in range(8)]
    async with (
        running_gateway(gw_config(), pipeline=FakePipeline()) as gw,
        aiohttp.ClientSession() as http,
    ):
        pc = create_peer_connection(LOOPBACK)
        if impairment is not None:
            impair_peer_connection(pc, impairment, seed=3, directions="incoming")
        track = StampedTrack(images, 15.0)
        transceiver = pc.addTransceiver(track, direction="sendrecv")
        await pc.setLocalDescription(await pc.createOffer())
        offer = offer_with_transport_cc(pc.localDescription.sdp)
        answer = await post_offer(http, gw.url + "/whip", pc, offer)
        Stamper(pc, offer)
        receiver = transceiver.receiver
        seen = watch_transport_sequence(pc, answer)
        feedback = transport_cc.install(receiver)
        assert feedback is not None
        tasks = [asyncio.ensure_future(feedback.run()), asyncio.ensure_future(_drain(receiver))]
        (session,) = sessions_of(gw.app).sessions.values()
        try:
            await asyncio.sleep(seconds)
            summary = session.summary()
            bitrate = session.encoders["VP8"].bitrate.snapshot(time.monotonic())
        finally:
            for task in tasks:
                task.cancel()
            track.stop()
            await pc.close()
    return seen, summary, bitrate


def watch_transport_sequence(pc: RTCPeerConnection, answer: str) -> list[int]:
    """The transport-wide sequence numbers of the packets `pc`'s video receiver gets, in arrival order (the
    transport is made to parse them: loadgen.transport_cc.parse_transport_cc)."""
    receiver = parse_transport_cc(pc, answer)
    assert receiver is not None, "the answer did not take transport-cc"
    seen: list[int] = []
    original = receiver._handle_rtp_packet

    async def handle(packet: RtpPacket, arrival_time_ms: int) -> None:
        if packet.extensions.transport_sequence_number is not None:
            seen.append(packet.extensions.transport_sequence_number)
        await original(packet, arrival_time_ms)

    receiver._handle_rtp_packet = handle  # type: ignore[method-assign]
    return seen


async def _drain(receiver: RTCRtpReceiver) -> None:
    while True:
        await receiver.track.recv()


async def test_the_processed_stream_is_stamped_and_its_feedback_reaches_the_bitrate_policy(
    astronaut: np.ndarray,
) -> None:
    seen, summary, bitrate = await _receive_with_feedback(astronaut, 3.0)
    assert len(seen) >= 20 and seen == list(range(seen[0], seen[0] + len(seen)))  # every packet, in order
    send = summary["transport_cc_send"]
    assert isinstance(send, dict) and send["stamped"] >= len(seen) and send["feedback_received"] >= 10
    (receiver,) = bitrate["receivers"]  # type: ignore[index]
    assert receiver["transit_samples"] >= 10 and receiver["transit_queue_ms"] is not None, bitrate
    assert receiver["transit_queue_ms"] < 30, bitrate  # a clean loopback: no queue


async def test_a_queue_seen_in_transport_cc_feedback_cuts_the_rate(astronaut: np.ndarray) -> None:
    """A deep buffer (2 s at 300 kbit/s) drops nothing while its queue grows: the one-way transit of the
    feedback shows it 10-20 times a second, and the rate comes down below the 500 kbit/s start before the
    receiver reports' round trips (one a second) have shown it twice."""
    deep = Impairment("deep-buffer-300k", rate_kbps=300, queue_ms=2000)
    _, _, bitrate = await _receive_with_feedback(astronaut, 6.0, deep)
    (receiver,) = bitrate["receivers"]  # type: ignore[index]
    assert receiver["transit_samples"] >= 20, bitrate
    assert receiver["loss_based_bps"] == 1_000_000, bitrate  # nothing lost: the queue alone did it
    assert receiver["delay_based_bps"] < 400_000 and bitrate["target_bps"] < 400_000, bitrate


async def test_a_whep_viewer_that_offers_transport_cc_gets_stamped_packets(astronaut: np.ndarray) -> None:
    async with (
        running_gateway(gw_config(), pipeline=FakePipeline()) as gw,
        aiohttp.ClientSession() as http,
    ):
        pub = await publish(http, gw.url, [cv2.resize(astronaut, (320, 240))])
        session_id = pub.location.rsplit("/", 1)[-1]
        pc = create_peer_connection(LOOPBACK)
        transceiver = pc.addTransceiver("video", direction="recvonly")
        try:
            assert await wait_for(lambda: len(pub.received.ids) >= 3, 30)
            await pc.setLocalDescription(await pc.createOffer())
            offer = offer_with_transport_cc(pc.localDescription.sdp)
            answer = await post_offer(http, f"{gw.url}/whep/{session_id}", pc, offer)
            assert answered_id(answer) is not None
            receiver = transceiver.receiver
            seen = watch_transport_sequence(pc, answer)
            drain = asyncio.ensure_future(_drain(receiver))
            assert await wait_for(lambda: len(seen) >= 10, 20)
            drain.cancel()
            assert seen == list(range(seen[0], seen[0] + len(seen)))
        finally:
            await pc.close()
            await pub.close()


async def test_a_load_generator_job_with_transport_cc_feeds_the_gateways_sender(media_dir: Path) -> None:
    """`loadgen --transport-cc`: the job offers it and returns feedback, as a browser does."""
    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        frames = build_loop(SynthConfig(320, 240, 15, "single_face", loop_frames=10), media_dir)
        job = WhipJob(0, ClientConfig(url=gw.url, transport_cc=True), frames, 15.0, lambda event: None, http)
        await job.start()
        try:
            (session,) = sessions_of(gw.app).sessions.values()
            encoder = session.encoders["VP8"]

            def samples() -> int:
                (receiver,) = encoder.bitrate.snapshot(time.monotonic())["receivers"]  # type: ignore[misc]
                return int(receiver["transit_samples"])

            assert await wait_for(lambda: samples() >= 10, 20)
        finally:
            await job.stop()
