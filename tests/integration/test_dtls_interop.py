"""DTLS and SDP interop with publishers that are not stock aiortc, with real aiortc peers
on 127.0.0.1 dressed as other stacks: an RSA certificate (GStreamer's webrtcbin, many media servers), a
publisher that insists on being the DTLS server (`a=setup:passive`), one that offers only RSA cipher suites,
and an H.264 offer spelled `42c01f` (Constrained Baseline, as some encoders write it)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable

import aiohttp
import cv2
import numpy as np
import pytest
from aiortc import RTCPeerConnection, RTCRtpSender, RTCRtpTransceiver, RTCSessionDescription
from aiortc.rtcdtlstransport import RTCCertificate, generate_certificate
from cryptography.hazmat.primitives.asymmetric import rsa
from OpenSSL import SSL

from gateway.webrtc.install import create_peer_connection
from loadgen.client import offer_only
from loadgen.track import StampedVideoTrack
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import LOOPBACK, gw_config, running_gateway
from tests.harness.peers import Received, consume
from tests.harness.waiting import wait_for

RSA_ONLY = b"ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384"


def _rsa_certificate(ciphers: bytes | None) -> RTCCertificate:
    """An RSA-2048 certificate (as GStreamer's DTLS agent makes), optionally with its own cipher list."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    certificate = RTCCertificate(key=key, cert=generate_certificate(key))  # type: ignore[arg-type]
    if ciphers is not None:
        original = certificate._create_ssl_context

        def create_ssl_context(*args: object, **kwargs: object) -> SSL.Context:
            ctx = original(*args, **kwargs)  # type: ignore[arg-type]
            ctx.set_cipher_list(ciphers)
            return ctx

        certificate._create_ssl_context = create_ssl_context  # type: ignore[method-assign]
    return certificate


def _foreign_publisher(
    certificate: RTCCertificate | None, images: list[np.ndarray], codec: str | None = None
) -> tuple[RTCPeerConnection, StampedVideoTrack, RTCRtpTransceiver]:
    pc = create_peer_connection(LOOPBACK)
    if certificate is not None:
        pc._RTCPeerConnection__certificates = [certificate]  # type: ignore[attr-defined]
    track = StampedVideoTrack.from_rgb(images, 15.0)
    transceiver = pc.addTransceiver(track, direction="sendrecv")
    if codec is not None:
        offer_only(transceiver, codec)
    return pc, track, transceiver


async def _whip(
    http: aiohttp.ClientSession, url: str, pc: RTCPeerConnection, munge: Callable[[str], str]
) -> tuple[str, str]:
    """POST the (munged) offer; apply the answer. The munge only changes what the gateway sees."""
    await pc.setLocalDescription(await pc.createOffer())
    async with http.post(
        url + "/whip?processors=none",
        data=munge(pc.localDescription.sdp),
        headers={"Content-Type": "application/sdp"},
    ) as resp:
        answer = await resp.text()
        assert resp.status == 201, answer
        location = resp.headers["Location"]
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
    return answer, location


async def _video_comes_back(
    pc: RTCPeerConnection, track: StampedVideoTrack, transceiver: RTCRtpTransceiver
) -> None:
    """Ten of the publisher's stamped frames return on its own transceiver."""
    received = Received()
    task = asyncio.ensure_future(consume(transceiver.receiver.track, track.sent, received))
    try:
        assert await wait_for(lambda: len(received.ids) >= 10, 30), pc.connectionState
    finally:
        task.cancel()


def _setup(sdp: str) -> set[str]:
    return set(re.findall(r"^a=setup:(\w+)", sdp, re.M))


@pytest.fixture
def frames(astronaut: np.ndarray) -> list[np.ndarray]:
    return [cv2.resize(astronaut, (320, 240))]


async def test_rsa_publisher_leaving_the_role_to_us_connects_with_us_as_client(
    frames: list[np.ndarray],
) -> None:
    """An RSA-certificate publisher that leaves the role to us (webrtcbin, whose OpenSSL server takes
    ECDHE-RSA suites): aiortc's own choice, the DTLS client, with ECDHE-RSA suites in our ClientHello."""
    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        pc, track, transceiver = _foreign_publisher(_rsa_certificate(RSA_ONLY), frames)
        try:
            answer, _ = await _whip(http, gw.url, pc, lambda sdp: sdp)
            assert _setup(answer) == {"active"}
            await _video_comes_back(pc, track, transceiver)
        finally:
            track.stop()
            await pc.close()


async def test_rsa_publisher_insisting_on_dtls_server_connects(frames: list[np.ndarray]) -> None:
    """`a=setup:passive` + RSA certificate: we must be the DTLS client and offer ECDHE-RSA suites
    (stock aiortc offers ECDSA suites only: "no shared cipher")."""
    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        pc, track, transceiver = _foreign_publisher(_rsa_certificate(RSA_ONLY), frames)
        try:
            answer, _ = await _whip(
                http, gw.url, pc, lambda sdp: sdp.replace("a=setup:actpass", "a=setup:passive")
            )
            assert _setup(answer) == {"active"}
            await _video_comes_back(pc, track, transceiver)
        finally:
            track.stop()
            await pc.close()


async def test_dtls_failure_is_logged_at_warning_with_its_cause(
    frames: list[np.ndarray], caplog: pytest.LogCaptureFixture
) -> None:
    """A client that offers only ECDHE-RSA suites against our ECDSA certificate cannot succeed; the operator
    must see why (it used to be "closed (peer failed)" and a DEBUG line from aiortc)."""
    monitor = RecordingMonitor()
    caplog.set_level(logging.WARNING, logger="gateway.webrtc.interop.dtls")
    async with (
        running_gateway(gw_config(), pipeline=FakePipeline(), monitor=monitor) as gw,
        aiohttp.ClientSession() as http,
    ):
        pc, track, _ = _foreign_publisher(_rsa_certificate(RSA_ONLY), frames)
        try:
            # `active`: the publisher is the DTLS client; its RSA-only suites meet our ECDSA certificate
            _, location = await _whip(
                http, gw.url, pc, lambda sdp: sdp.replace("a=setup:actpass", "a=setup:active")
            )
            session_id = location.rsplit("/", 1)[-1]
            assert await wait_for(lambda: any(sid == session_id for sid, _ in monitor.closed_sessions), 20)
        finally:
            track.stop()
            await pc.close()
    reason = dict(monitor.closed_sessions)[session_id]
    assert reason.startswith("peer failed (DTLS: no cipher suite in common"), reason
    assert "[no shared cipher; we were DTLS server]" in reason, reason
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and session_id in r.getMessage()]
    assert warnings, [r.getMessage() for r in caplog.records]
    assert "no shared cipher" in warnings[0].getMessage() and "DTLS server" in warnings[0].getMessage()


async def test_h264_offer_spelled_42c01f_gets_h264_both_ways(frames: list[np.ndarray]) -> None:
    """Offer `profile-level-id=42c01f` (Constrained Baseline written with constraint_set0+1): aiortc answers
    its own spelling of the same profile, and video flows both ways in H.264 (FFmpeg offers 42000c and
    libdatachannel 42e01f: the interop matrix)."""

    def to_42c0(sdp: str) -> str:
        return sdp.replace("profile-level-id=42e01f", "profile-level-id=42c01f")

    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        pc, track, transceiver = _foreign_publisher(None, frames, codec="H264")
        try:
            answer, _ = await _whip(http, gw.url, pc, to_42c0)
            assert re.findall(r"a=rtpmap:\d+ (\w+)/90000", answer)[0] == "H264", answer
            await _video_comes_back(pc, track, transceiver)
        finally:
            track.stop()
            await pc.close()


async def test_offer_listing_h264_before_vp8_gets_decodable_video_back(frames: list[np.ndarray]) -> None:
    """Safari and many non-browser publishers list H.264 first. The fan-out encodes VP8 for them; the answer
    must name VP8 alone, or aiortc's sender labels VP8 packets as H.264 (connected, nothing decodable)."""
    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        pc, track, transceiver = _foreign_publisher(None, frames)
        caps = RTCRtpSender.getCapabilities("video").codecs
        rank = {"video/h264": 0, "video/vp8": 1, "video/rtx": 2}
        transceiver.setCodecPreferences(sorted(caps, key=lambda c: rank[c.mimeType.lower()]))
        try:
            answer, _ = await _whip(http, gw.url, pc, lambda sdp: sdp)
            assert re.findall(r"^a=rtpmap:\d+ ([\w-]+)/", answer, re.M) == ["VP8", "rtx"], answer
            await _video_comes_back(pc, track, transceiver)
        finally:
            track.stop()
            await pc.close()


async def test_a_session_deleted_before_it_connects_is_not_a_dtls_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Closing a session whose handshake never started (DELETE before the client connects; the reaper; a
    shutdown) stops its ICE under the pending handshake: that is our own close, not a failure to warn of."""
    from bench.fuzz import real_offer

    caplog.set_level(logging.DEBUG, logger="gateway.webrtc.interop.dtls")
    offer = await real_offer()
    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        locations = []
        sdp = {"Content-Type": "application/sdp"}
        for _ in range(3):
            async with http.post(gw.url + "/whip", data=offer, headers=sdp) as r:
                assert r.status == 201, await r.text()
                locations.append(r.headers["Location"])
        for location in locations:
            async with http.delete(gw.url + location) as r:
                assert r.status == 200

        def abandoned() -> int:
            return sum("abandoned" in r.getMessage() for r in caplog.records)

        assert await wait_for(lambda: abandoned() == 3, 10), [r.getMessage() for r in caplog.records]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
