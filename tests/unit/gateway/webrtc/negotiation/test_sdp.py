"""check_offer: what a browser sends passes; everything WHIP/WHEP must refuse is one SdpError line."""

from __future__ import annotations

import pytest

from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig
from gateway.webrtc.negotiation.sdp import SdpError, check_offer
from tests.harness.sdp import CHROMIUM_OFFER


def _without(sdp: str, *prefixes: str) -> str:
    return "\r\n".join(line for line in sdp.split("\r\n") if not line.startswith(prefixes))


def _reason(sdp: str, *, need_send: bool = True) -> str:
    with pytest.raises(SdpError) as info:
        check_offer(sdp, need_send=need_send)
    reason = str(info.value)
    assert reason and "\n" not in reason
    return reason


def test_chromium_offer_passes() -> None:
    summary = check_offer(CHROMIUM_OFFER, need_send=True)
    assert summary.video_directions == ("sendrecv",)
    assert "VP8" in summary.video_codecs and "H264" in summary.video_codecs
    assert summary.has_audio
    check_offer(CHROMIUM_OFFER, need_send=False)  # a WHEP viewer offering sendrecv can receive too


def test_recvonly_offer_is_a_viewer_not_a_publisher() -> None:
    recvonly = CHROMIUM_OFFER.replace("a=sendrecv", "a=recvonly")
    assert check_offer(recvonly, need_send=False).video_directions == ("recvonly",)
    assert "direction recvonly" in _reason(recvonly, need_send=True)
    assert "sendonly" in _reason(CHROMIUM_OFFER.replace("a=sendrecv", "a=sendonly"), need_send=False)


def test_no_video() -> None:
    start = CHROMIUM_OFFER.index("m=video")
    end = CHROMIUM_OFFER.index("m=audio")
    audio_only = CHROMIUM_OFFER[:start] + CHROMIUM_OFFER[end:]
    assert "no video" in _reason(audio_only.replace("a=group:BUNDLE 0 1", "a=group:BUNDLE 1"))


def test_no_bundle() -> None:
    assert "BUNDLE" in _reason(_without(CHROMIUM_OFFER, "a=group:BUNDLE"))


def test_codec_choice_prefers_vp8_then_h264_and_refuses_the_rest() -> None:
    assert check_offer(CHROMIUM_OFFER, need_send=True).codec == "VP8"
    h264_only = CHROMIUM_OFFER.replace("VP8/90000", "VP9/90000")  # e.g. OBS: H.264 only
    assert check_offer(h264_only, need_send=True).codec == "H264"
    neither = h264_only.replace("H264/90000", "VP9/90000")
    reason = _reason(neither)
    assert "no VP8 or H264" in reason and "AV1" in reason and "VP9" in reason


def test_missing_ice_and_dtls() -> None:
    assert "ICE" in _reason(_without(CHROMIUM_OFFER, "a=ice-pwd"))
    assert "DTLS" in _reason(_without(CHROMIUM_OFFER, "a=fingerprint"))


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "   \r\n",
        "hello world",
        "v=0",
        "v=0\r\nm=video",
        "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
        "m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=rtpmap:96\r\n",
        "v=0\r\n" + "a=" + "x" * 70_000,
        "\x00\x01\x02v=0",
    ],
)
def test_garbage_is_one_line_sdp_error(garbage: str) -> None:
    _reason(garbage)


async def test_aiortc_offer_passes() -> None:
    """The gateway's own tests and the load generator publish with aiortc: its offers must pass too."""
    pc = create_peer_connection(IceConfig.loopback_only())
    pc.addTransceiver("video", direction="sendrecv")
    try:
        await pc.setLocalDescription(await pc.createOffer())
        sdp = pc.localDescription.sdp
    finally:
        await pc.close()
    assert check_offer(sdp, need_send=True).video_directions == ("sendrecv",)
    assert "127.0.0.1" in sdp


def test_trickle_fragment_parsing() -> None:
    from gateway.webrtc.negotiation.sdp import parse_trickle_fragment

    frag = parse_trickle_fragment(
        "a=ice-ufrag:abcd\r\na=ice-pwd:secretsecretsecret\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=mid:0\r\n"
        "a=candidate:1 1 udp 2130706431 127.0.0.1 50000 typ host\r\na=end-of-candidates\r\n"
    )
    assert frag.ufrag == "abcd" and frag.end_of_candidates
    assert frag.candidates == (("0", "1 1 udp 2130706431 127.0.0.1 50000 typ host"),)
    with pytest.raises(SdpError, match="malformed candidate"):
        parse_trickle_fragment("a=candidate:1 1 udp\r\n")
    with pytest.raises(SdpError, match="not an SDP fragment"):
        parse_trickle_fragment("GET / HTTP/1.1\r\n")
