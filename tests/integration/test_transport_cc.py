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
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
from loadgen.track import StampedVideoTrack
from loadgen.transport_cc import answered_id, offer_with_transport_cc, parse_transport_cc
from tests.harness.fakes import FakePipeline
from tests.harness.gateway import LOOPBACK, gw_config, running_gateway
from tests.harness.media import busy_pictures
from tests.harness.peers import publish
from tests.harness.waiting import wait_for


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
        self.settled: set[int] = set()  # what had been sent when the publisher stopped
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

    def reported(self) -> set[int]:
        """The sequence numbers some feedback packet reported as arrived."""
        return {seq for fb in self.feedback for seq, at in fb.arrivals if at is not None}


async def post_offer(http: aiohttp.ClientSession, url: str, pc: RTCPeerConnection, offer: str) -> str:
    """POST `offer` (as munged) to a WHIP/WHEP URL, expect 201, apply the answer; the answer."""
    async with http.post(url, data=offer, headers={"Content-Type": "application/sdp"}) as resp:
        assert resp.status == 201, await resp.text()
        answer = await resp.text()
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
    return answer


async def _publish(
    offer_tcc: bool, enabled: bool, until: Callable[[Stamper, Any], bool], settle: bool = False
) -> tuple[str, Stamper, dict[str, object]]:
    """Publish until `until(stamper, session)` holds (deadline generous for a loaded machine). With `settle`,
    the publisher then stops sending and waits until every packet it sent has been reported."""
    image = cv2.resize(np.full((240, 320, 3), 90, np.uint8), (320, 240))
    async with (
        running_gateway(gw_config(transport_cc=enabled), pipeline=FakePipeline()) as gw,
        aiohttp.ClientSession() as http,
    ):
        pc = create_peer_connection(LOOPBACK)
        track = StampedVideoTrack.from_rgb([image], 15.0)
        pc.addTransceiver(track, direction="sendrecv")
        await pc.setLocalDescription(await pc.createOffer())
        browser_like = offer_with_transport_cc(pc.localDescription.sdp)
        offer = browser_like if offer_tcc else pc.localDescription.sdp
        answer = await post_offer(http, gw.url + "/whip", pc, offer)
        stamper = Stamper(pc, browser_like)
        (session,) = sessions_of(gw.app).sessions.values()
        try:
            assert await wait_for(lambda: session.counters.frames_in >= 3, 30)
            seen = (len(stamper.sent), len(stamper.feedback))
            assert await wait_for(lambda: until(stamper, session), 60), seen
            if settle:
                track.stop()
                await asyncio.sleep(0)  # a frame already being packetized still leaves
                stamper.settled = set(stamper.sent)
                assert await wait_for(lambda: stamper.settled <= stamper.reported(), 20), sorted(
                    stamper.settled - stamper.reported()
                )[:20]
            summary = session.summary()
        finally:
            track.stop()
            await pc.close()
    return answer, stamper, summary


def _slope(pairs: list[tuple[float, float]]) -> float:
    """The median slope of y against x over pairs far apart in x (Theil-Sen on first third x last third):
    a few packets delayed by a busy machine move it little; a wrong time unit moves it by its factor."""
    pairs = sorted(pairs)
    third = max(1, len(pairs) // 3)
    slopes = [(y2 - y1) / (x2 - x1) for x1, y1 in pairs[:third] for x2, y2 in pairs[-third:] if x2 > x1]
    return statistics.median(slopes)


async def test_every_stamped_packet_is_reported_with_its_arrival_time() -> None:
    def three_seconds(stamper: Stamper, session: Any) -> bool:
        return len(stamper.sent) >= 2 and max(stamper.sent.values()) - min(stamper.sent.values()) >= 3.0

    answer, stamper, summary = await _publish(offer_tcc=True, enabled=True, until=three_seconds, settle=True)
    assert answered_id(answer) is not None  # the extension and the feedback, on the video m-line

    reported = {seq: at for fb in stamper.feedback for seq, at in fb.arrivals}
    received = {seq: at for seq, at in reported.items() if at is not None}
    assert len(stamper.feedback) >= 10  # every 50 ms while packets arrive
    # every packet sent is reported, none lost on a clean loopback (the feedback may list a seq twice only
    # as lost-then-found, which a clean link never shows)
    assert stamper.settled <= set(received) <= set(stamper.sent) and len(reported) == len(received)
    # the reported arrivals keep the spacing the packets were sent with: the same clock rate (a wrong unit
    # would scale it), whatever a busy machine adds to single packets
    slope = _slope([(stamper.sent[seq], at / 1e6) for seq, at in received.items()])
    assert 0.9 < slope < 1.1, slope
    assert [fb.feedback_count for fb in stamper.feedback[:5]] == list(range(5))
    stats = summary["transport_cc"]
    assert isinstance(stats, dict) and stats["feedback_sent"] >= len(stamper.feedback)


@pytest.mark.parametrize(("offer_tcc", "enabled"), [(False, True), (True, False)])
async def test_no_transport_cc_unless_offered_and_enabled(offer_tcc: bool, enabled: bool) -> None:
    # 15 frames in: with transport-cc on, that is a dozen feedback packets (every 50 ms while packets arrive)
    answer, stamper, summary = await _publish(
        offer_tcc=offer_tcc, enabled=enabled, until=lambda stamper, session: session.counters.frames_in >= 18
    )
    assert "transport-cc" not in answer and TRANSPORT_CC_URI not in answer
    assert stamper.feedback == [] and summary["transport_cc"] is None


async def _receive_with_feedback(
    astronaut: np.ndarray,
    until: Callable[[list[int], Any, dict[str, Any]], bool],
    impairment: Impairment | None = None,
) -> tuple[list[int], dict[str, object], dict[str, Any]]:
    """A publisher that offers transport-cc and sends transport-cc feedback for the processed stream it gets
    back (as a browser does), until `until(seen, session, bitrate)` holds: the transport-wide sequence numbers
    it saw, the session summary and the encoder's bitrate snapshot at that moment. The picture pans and
    carries noise, so the encoder spends its whole budget at every frame."""
    images = busy_pictures(cv2.resize(astronaut, (320, 240)))
    async with (
        running_gateway(gw_config(), pipeline=FakePipeline()) as gw,
        aiohttp.ClientSession() as http,
    ):
        pc = create_peer_connection(LOOPBACK)
        if impairment is not None:
            impair_peer_connection(pc, impairment, seed=3, directions="incoming")
        track = StampedVideoTrack.from_rgb(images, 15.0)
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
        encoder = session.encoders["VP8"]
        try:
            await wait_for(lambda: until(seen, session, encoder.bitrate.snapshot(time.monotonic())), 90)
            summary = session.summary()
            bitrate = encoder.bitrate.snapshot(time.monotonic())
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


def _receiver(bitrate: dict[str, Any]) -> dict[str, Any] | None:
    receivers = bitrate["receivers"]
    return receivers[0] if receivers else None


async def test_the_processed_stream_is_stamped_and_its_feedback_reaches_the_bitrate_policy(
    astronaut: np.ndarray,
) -> None:
    def fed(seen: list[int], session: Any, bitrate: dict[str, Any]) -> bool:
        receiver = _receiver(bitrate)
        return len(seen) >= 20 and receiver is not None and receiver["transit_samples"] >= 10

    seen, summary, bitrate = await _receive_with_feedback(astronaut, fed)
    assert len(seen) >= 20 and seen == list(range(seen[0], seen[0] + len(seen)))  # every packet, in order
    send = summary["transport_cc_send"]
    assert isinstance(send, dict) and send["stamped"] >= len(seen) and send["feedback_received"] >= 10
    receiver = _receiver(bitrate)
    assert receiver is not None and receiver["transit_samples"] >= 10, bitrate
    # A clean loopback: no queue. (A queue here is a deep buffer's seconds; a busy machine adds tens of ms.)
    assert receiver["transit_queue_ms"] is not None and receiver["transit_queue_ms"] < 100, bitrate


async def test_a_queue_seen_in_transport_cc_feedback_cuts_the_rate(astronaut: np.ndarray) -> None:
    """A deep buffer (2 s at 300 kbit/s) drops nothing while its queue grows: the one-way transit of the
    feedback shows it 10-20 times a second, and the rate comes down below the 500 kbit/s start."""
    deep = Impairment("deep-buffer-300k", rate_kbps=300, queue_ms=2000)
    at_cut: list[dict[str, Any]] = []

    def cut(seen: list[int], session: Any, bitrate: dict[str, Any]) -> bool:
        receiver = _receiver(bitrate)
        if receiver is not None and receiver["delay_based_bps"] < 400_000:
            at_cut.append(bitrate)
        return bool(at_cut)

    _, _, bitrate = await _receive_with_feedback(astronaut, cut, deep)
    assert at_cut, bitrate
    receiver = _receiver(at_cut[0])
    # the feedback showed the queue (a keyframe into the 300 kbit/s buffer: ~200 ms within half a second)
    assert receiver is not None and receiver["transit_samples"] >= 3, at_cut[0]
    assert receiver["transit_queue_ms"] is not None and receiver["transit_queue_ms"] >= 50, at_cut[0]
    assert receiver["loss_based_bps"] == 1_000_000, at_cut[0]  # nothing lost: the queue alone did it
    assert at_cut[0]["target_bps"] < 400_000, at_cut[0]


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
