"""On an aiortc release the private names were not checked against, every extension refuses cleanly: it
changes nothing on the connection, its transceivers, senders or receivers, and says so by its return value
(or, where going on unchanged would be unsafe, by one RuntimeError line)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiortc
import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription

from gateway.webrtc import chain, compat
from gateway.webrtc.congestion import transport_cc, uplink_feedback
from gateway.webrtc.congestion.queue_delay import OneWayDelay
from gateway.webrtc.congestion.retransmit_budget import RetransmitBudget
from gateway.webrtc.congestion.retransmit_limit import limit_retransmissions
from gateway.webrtc.congestion.sender_feedback import route_keyframe_requests, watch_sender_feedback
from gateway.webrtc.congestion.uplink_rate import UplinkRateConfig
from gateway.webrtc.install import Features, install
from gateway.webrtc.interop.dtls import use_legacy_dtls, watch_dtls
from gateway.webrtc.interop.ice import LOOPBACK, IceConfig, configure_gathering
from gateway.webrtc.negotiation.audio_sdp import accept_publisher_audio
from gateway.webrtc.negotiation.video_codecs import answer_video_codec
from gateway.webrtc.recovery.jitter_buffer import apply_low_latency_receive, measure_transit
from gateway.webrtc.sync.sender_clock import stamp_sender_reports
from gateway.webrtc.sync.taps import tap_audio_packets, tap_sender_reports
from loadgen.impair import Impairment, impair_peer_connection
from loadgen.publisher_encoder import use_publisher_encoder


def _state(*objects: Any) -> list[dict[str, Any]]:
    """Each object's own attributes, by identity: a wrapper set on an instance shows as a changed value."""
    return [{name: id(value) for name, value in vars(o).items()} for o in objects]


@pytest.fixture
async def answering() -> AsyncIterator[RTCPeerConnection]:
    """A connection that has taken a video + Opus offer (set before the release is faked)."""
    offerer = RTCPeerConnection()
    offerer.addTransceiver("video", direction="sendrecv")
    offerer.addTransceiver("audio", direction="sendonly")
    offer = (await offerer.createOffer()).sdp
    pc = RTCPeerConnection()
    await pc.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
    yield pc
    await pc.close()
    await offerer.close()


@pytest.fixture
def unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aiortc, "__version__", "9.0.0")
    assert not compat.supported()


def test_the_installed_release_is_a_checked_one() -> None:
    assert compat.supported(), f"aiortc {aiortc.__version__} is outside {compat.CHECKED_AIORTC}"


async def test_connection_extensions_refuse(answering: RTCPeerConnection, unchecked: None) -> None:
    pc = answering
    video = next(t for t in pc.getTransceivers() if t.kind == "video")
    audio = next(t for t in pc.getTransceivers() if t.kind == "audio")
    before = _state(pc, video, audio, video.receiver, video.sender, audio.receiver, video.receiver.transport)

    assert apply_low_latency_receive(pc) is False
    assert install(pc, Features(dtls_label="test")).low_latency_receive is False
    assert watch_dtls(pc, "again").patched is False
    assert chain.on_dtls_transports(pc, "test", lambda transport: None) is False
    assert use_legacy_dtls(pc, "FFmpeg's WHIP muxer") is False
    assert answer_video_codec(pc, "VP8") == 0
    assert transport_cc.answer_transport_cc(pc) == 0
    assert transport_cc.install(video.receiver) is None
    assert uplink_feedback.install(video.receiver, UplinkRateConfig(), OneWayDelay()) is None
    assert measure_transit(video.receiver, OneWayDelay()) is False
    assert tap_audio_packets(audio.receiver, lambda packet: None) is None
    assert tap_sender_reports(video.receiver, lambda ntp, rtp: None) is False
    assert compat.decoded_queue(video.receiver.track) is None
    assert compat.negotiated_codecs(video) == []

    # the watch above is remembered on the connection under our own mark; nothing of aiortc's changed
    after = _state(pc, video, audio, video.receiver, video.sender, audio.receiver, video.receiver.transport)
    after[0].pop("_livefuse_dtls_watch")
    assert after == before


async def test_sender_extensions_refuse(answering: RTCPeerConnection, unchecked: None) -> None:
    sender = next(t for t in answering.getTransceivers() if t.kind == "video").sender
    before = _state(sender)

    assert route_keyframe_requests(sender, lambda: None) is False
    assert watch_sender_feedback(sender, lambda bps, now: None, lambda loss, now: None) is False
    assert limit_retransmissions(sender, RetransmitBudget(), lambda: 1e6) is False
    assert stamp_sender_reports(sender, lambda timestamp: None) is None
    assert transport_cc.install_send_side(answering, sender, lambda sample: None) is None
    assert compat.sender_encoder(sender) is None
    assert use_publisher_encoder(sender, "video/VP8", noise_sensitivity=0) is False

    assert _state(sender) == before


async def test_opus_is_answered_inactive(answering: RTCPeerConnection, unchecked: None) -> None:
    assert accept_publisher_audio(answering) is None
    assert {t.direction for t in answering.getTransceivers() if t.kind == "audio"} == {"inactive"}


async def test_what_would_be_unsafe_unchanged_is_refused_in_one_line(unchecked: None) -> None:
    """Gathering on every interface when loopback was asked for, or an unimpaired link when an impaired one
    was: refused, not silently done."""
    pc = RTCPeerConnection()
    try:
        with pytest.raises(RuntimeError, match="no per-connection ICE hook"):
            configure_gathering(pc, LOOPBACK)
        with pytest.raises(RuntimeError, match="no per-connection ICE hook"):
            install(pc, Features.of(IceConfig.loopback_only()))
        with pytest.raises(RuntimeError, match="cannot impair"):
            impair_peer_connection(pc, Impairment(loss=0.1))
    finally:
        await pc.close()
