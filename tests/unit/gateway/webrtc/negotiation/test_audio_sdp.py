"""The audio a publisher's or a viewer's answer names: Opus alone, whatever the offer lists first."""

from __future__ import annotations

import re

import pytest
from aiortc import RTCPeerConnection, RTCRtpSender, RTCSessionDescription

from gateway.webrtc.negotiation.audio_sdp import accept_publisher_audio, viewer_audio_transceiver


@pytest.mark.parametrize("role", ["publisher", "viewer"])
async def test_audio_answer_names_only_opus_when_the_offer_lists_pcmu_first(role: str) -> None:
    """The relay forwards Opus untouched: an answer that also named PCMU (first, in the offer's order) made
    aiortc's sender label the relayed packets PCMU (and a publisher could send PCMU into the relay)."""
    offerer = RTCPeerConnection()
    audio = offerer.addTransceiver("audio", direction="sendonly" if role == "publisher" else "recvonly")
    caps = RTCRtpSender.getCapabilities("audio").codecs
    audio.setCodecPreferences(sorted(caps, key=lambda c: c.mimeType.lower() != "audio/pcmu"))
    offer = (await offerer.createOffer()).sdp
    pc = RTCPeerConnection()
    try:
        assert re.search(r"^m=audio \d+ \S+ 0 ", offer, re.M)  # PCMU first
        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
        chosen = accept_publisher_audio(pc) if role == "publisher" else viewer_audio_transceiver(pc, True)
        assert chosen is not None
        answer = (await pc.createAnswer()).sdp
    finally:
        await pc.close()
        await offerer.close()
    assert re.findall(r"^a=rtpmap:\d+ ([^/]+)/", answer, re.M) == ["opus"]
