"""The wrap chain `gateway.webrtc.install` leaves on a real peer connection, read back from the live objects:
which extension sits on which aiortc method, in which order (the later one outermost). A reordering, a
layer lost or a second copy of one fails here, whatever the media tests happen to notice."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiortc import RTCPeerConnection, RTCRtpReceiver, RTCRtpSender, RTCSessionDescription
from aiortc.jitterbuffer import JitterBuffer
from aiortc.mediastreams import VideoStreamTrack

from gateway.webrtc import chain, compat
from gateway.webrtc.chain import layers
from gateway.webrtc.congestion.queue_delay import OneWayDelay
from gateway.webrtc.congestion.retransmit_budget import RetransmitBudget
from gateway.webrtc.congestion.transport_cc import TRANSPORT_CC_URI
from gateway.webrtc.congestion.uplink_rate import UplinkRateConfig
from gateway.webrtc.install import (
    SenderFeedback,
    install_answer,
    install_link,
    install_sender,
    install_sender_clock,
    install_transport_cc_receiver,
    install_video_receiver,
    open_peer_connection,
    tap_audio,
    tap_video_reports,
)
from gateway.webrtc.interop.ice import GATHERING, IceConfig
from gateway.webrtc.negotiation.audio_sdp import accept_publisher_audio
from gateway.webrtc.recovery.jitter_buffer import MarkerJitterBuffer
from gateway.webrtc.sync.taps import PacketTap


def _with_transport_cc(sdp: str) -> str:
    """A browser's offer: transport-cc on the video m-line (aiortc does not offer it)."""
    sdp = re.sub(r"(m=video[^\r]*\r\n)", rf"\1a=extmap:9 {TRANSPORT_CC_URI}\r\n", sdp, count=1)
    return re.sub(r"(a=rtpmap:(\d+) VP8/90000\r\n)", r"\1a=rtcp-fb:\2 transport-cc\r\n", sdp)


@dataclass
class Published:
    pc: RTCPeerConnection
    video: RTCRtpReceiver
    audio: RTCRtpReceiver
    sender: RTCRtpSender
    audio_sender: RTCRtpSender


@pytest.fixture
async def published() -> AsyncIterator[Published]:
    """A publisher's connection as the session manager builds it, step by step, in install's order, plus
    the load generator's link model (registered last, as the load generator does)."""
    offerer = RTCPeerConnection()
    offerer.addTransceiver("video", direction="sendrecv")
    offerer.addTransceiver("audio", direction="sendrecv")
    offer = _with_transport_cc((await offerer.createOffer()).sdp)

    pc, _ = open_peer_connection(IceConfig.loopback_only(), "wrap chain")
    install_link(pc, lambda size, now: now, lambda size, now: now)
    await pc.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
    video = next(t for t in pc.getTransceivers() if t.kind == "video")
    audio = next(t for t in pc.getTransceivers() if t.kind == "audio")
    assert install_video_receiver(video.receiver, UplinkRateConfig(), OneWayDelay()) is not None
    assert install_answer(pc, offer, "VP8", transport_cc=True, legacy_dtls=None) == 1
    assert install_transport_cc_receiver(pc) is not None
    assert tap_video_reports(video.receiver, lambda ntp, rtp: None)
    assert accept_publisher_audio(pc) is audio
    assert tap_audio(audio.receiver, lambda packet: None, lambda ntp, rtp: None)

    sender = pc.addTrack(VideoStreamTrack())
    feedback = SenderFeedback(
        request_keyframe=lambda: None,
        on_remb=lambda bps, now: None,
        on_loss=lambda loss, now: None,
        on_rtt=lambda rtt, now: None,
        retransmits=RetransmitBudget(),
        rate_bps=lambda: 1e6,
        rtt_s=lambda: None,
        on_transit=lambda sample: None,
    )
    side = install_sender(
        pc,
        sender,
        feedback,
        stamp_reports=lambda s: install_sender_clock(s, lambda timestamp: None),
        transport_cc=True,
    )
    assert side is not None
    assert install_sender_clock(audio.sender, lambda timestamp: None) is not None
    yield Published(pc, video.receiver, audio.receiver, sender, audio.sender)
    await pc.close()
    await offerer.close()


async def test_the_connection_factories_call_their_hooks_in_install_order(published: Published) -> None:
    assert layers(published.pc, compat.PC_CREATE_DTLS_TRANSPORT) == (chain.DTLS_LAYER,)
    assert layers(published.pc, compat.PC_CREATE_TRANSCEIVER) == (chain.TRANSCEIVER_LAYER,)
    assert chain.hook_keys(published.pc) == {
        chain.DTLS_LAYER: (
            "_livefuse_gathering",
            "_livefuse_dtls_watch",
            "_livefuse_dtls_retransmit",
            "_livefuse_impaired",
        ),
        chain.TRANSCEIVER_LAYER: ("_livefuse_low_latency",),
    }


async def test_the_publishers_receivers(published: Published) -> None:
    video, audio = published.video, published.audio
    assert type(compat.jitter_buffer(video)) is MarkerJitterBuffer
    assert layers(video, compat.SEND_RTCP) == ("uplink REMB cap",)
    assert layers(video, compat.RECEIVER_HANDLE_RTP_PACKET) == ("transport-cc recorder",)
    assert layers(video, compat.HANDLE_RTCP_PACKET) == ("sender report tap",)
    assert layers(video, compat.RECEIVER_SEND_RTCP_NACK) == ("loss recovery NACK filter",)

    assert type(compat.jitter_buffer(audio)) is PacketTap
    assert layers(audio, compat.HANDLE_RTCP_PACKET) == ("sender report tap",)
    for name in (compat.SEND_RTCP, compat.RECEIVER_HANDLE_RTP_PACKET, compat.RECEIVER_SEND_RTCP_NACK):
        assert layers(audio, name) == ()  # marker release and the uplink cap are video's only


async def test_the_senders(published: Published) -> None:
    sender = published.sender
    # outermost first: the report is stamped with its capture time, then recorded as it went out
    assert layers(sender, compat.SEND_RTCP) == ("capture-clock sender reports", "receiver feedback")
    assert layers(sender, compat.HANDLE_RTCP_PACKET) == ("receiver feedback",)
    assert layers(sender, compat.SENDER_RETRANSMIT) == ("retransmission budget",)
    assert layers(sender, compat.SENDER_NEXT_ENCODED_FRAME) == ("capture-clock sender reports",)
    assert layers(sender, compat.SENDER_SEND_KEYFRAME) == ("keyframe requests to the encoder",)

    audio = published.audio_sender
    assert layers(audio, compat.SEND_RTCP) == ("capture-clock sender reports",)
    assert layers(audio, compat.HANDLE_RTCP_PACKET) == ()


async def test_the_dtls_transport_and_its_ice_connection(published: Published) -> None:
    transport = published.sender.transport
    # outermost first: the early resends see every datagram the watched handshake writes and reads
    assert layers(transport, compat.DTLS_DO_HANDSHAKE) == ("DTLS retransmit", "DTLS watch")
    assert layers(transport, compat.DTLS_SET_STATE) == ("DTLS watch",)
    assert layers(transport, compat.DTLS_SEND_RTP) == ("transport-cc send side",)
    assert layers(transport, compat.DTLS_HANDLE_RTCP_DATA) == ("transport-cc send side",)
    for certificate in compat.certificates(published.pc):
        assert layers(certificate, compat.CERTIFICATE_SSL_CONTEXT) == ("DTLS watch",)

    connection = compat.ice_connection(transport)
    assert layers(connection, GATHERING) == ("host addresses, ports and DSCP",)
    assert layers(connection, "sendto") == ("link model",)
    assert layers(connection, "data_received") == ("link model",)


async def test_installing_again_adds_no_layer(published: Published) -> None:
    """Each extension is idempotent: a second install leaves the chain as it was."""
    pc, video = published.pc, published.video
    before = {name: layers(video, name) for name in (compat.SEND_RTCP, compat.HANDLE_RTCP_PACKET)}
    install_video_receiver(video, UplinkRateConfig(), OneWayDelay())
    install_transport_cc_receiver(pc)
    tap_video_reports(video, lambda ntp, rtp: None)
    install_sender_clock(published.sender, lambda timestamp: None)
    assert {name: layers(video, name) for name in before} == before
    assert layers(video, compat.RECEIVER_HANDLE_RTP_PACKET) == ("transport-cc recorder",)
    assert len(layers(published.sender, compat.SEND_RTCP)) == 2


def test_every_private_name_exists_on_the_checked_aiortc() -> None:
    """compat's names are real on this release: a rename in aiortc fails here, not in a live session."""

    from aiortc import rtcdtlstransport, rtcpeerconnection, rtcrtpreceiver, rtcrtpsender

    assert compat.supported()
    assert hasattr(compat.receiver_module(), compat.RECEIVER_GET_DECODER)
    owners = {
        rtcpeerconnection.RTCPeerConnection: ("PC_CREATE_TRANSCEIVER", "PC_CREATE_DTLS_TRANSPORT"),
        rtcrtpreceiver.RTCRtpReceiver: ("RECEIVER_SEND_RTCP_NACK", "RECEIVER_HANDLE_RTP_PACKET", "SEND_RTCP"),
        rtcrtpsender.RTCRtpSender: (
            "SENDER_NEXT_ENCODED_FRAME",
            "SENDER_RETRANSMIT",
            "SENDER_SEND_KEYFRAME",
            "SEND_RTCP",
            "HANDLE_RTCP_PACKET",
        ),
        rtcdtlstransport.RTCDtlsTransport: (
            "DTLS_DO_HANDSHAKE",
            "DTLS_SET_STATE",
            "DTLS_SET_ROLE",
            "DTLS_SEND_RTP",
            "DTLS_HANDLE_RTCP_DATA",
        ),
        rtcdtlstransport.RTCCertificate: ("CERTIFICATE_SSL_CONTEXT",),
        JitterBuffer: ("JITTER_ORIGIN", "JITTER_IS_VIDEO", "JITTER_PACKETS"),
    }
    missing = []
    for owner, names in owners.items():
        target = (
            JitterBuffer(capacity=16, is_video=True) if owner is JitterBuffer else owner
        )  # instance state
        missing += [
            f"{owner.__name__}.{getattr(compat, n)}" for n in names if not hasattr(target, getattr(compat, n))
        ]
    assert missing == []


async def test_the_ice_transport_sender_the_early_dtls_resends_use() -> None:
    pc = RTCPeerConnection()
    pc.addTransceiver("video")
    ice_transport = pc.getTransceivers()[0].sender.transport.transport  # an instance attribute
    assert callable(compat.ice_send(ice_transport))
    await pc.close()
