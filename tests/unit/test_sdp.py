"""check_offer: what a browser sends passes; everything WHIP/WHEP must refuse is one SdpError line."""

from __future__ import annotations

import pytest

from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig
from gateway.webrtc.negotiation.sdp import SdpError, check_offer

FINGERPRINT = ":".join(["AB"] * 32)

# The shape of a Chromium 12x WHIP offer (sendrecv video + audio, BUNDLE, many codecs, rtx, extmaps,
# ssrc-group FID, no candidates yet: non-trickle clients wait for gathering, which adds a=candidate lines).
CHROMIUM_OFFER = "\r\n".join(
    [
        "v=0",
        "o=- 4611731400430051336 2 IN IP4 127.0.0.1",
        "s=-",
        "t=0 0",
        "a=group:BUNDLE 0 1",
        "a=extmap-allow-mixed",
        "a=msid-semantic: WMS 4f1d2a9e-6c3b-4d58-9e2f-0a1b2c3d4e5f",
        "m=video 9 UDP/TLS/RTP/SAVPF 96 97 98 99 100 101 35 36 102 103",
        "c=IN IP4 0.0.0.0",
        "a=rtcp:9 IN IP4 0.0.0.0",
        "a=candidate:1 1 udp 2122260223 127.0.0.1 54321 typ host generation 0 network-id 1",
        "a=ice-ufrag:Qx3v",
        "a=ice-pwd:7nPqD1kB2mZ9rXyT4wLs0aEf",
        "a=ice-options:trickle",
        f"a=fingerprint:sha-256 {FINGERPRINT}",
        "a=setup:actpass",
        "a=mid:0",
        "a=extmap:1 urn:ietf:params:rtp-hdrext:toffset",
        "a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time",
        "a=extmap:3 urn:3gpp:video-orientation",
        "a=extmap:4 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01",
        "a=extmap:9 urn:ietf:params:rtp-hdrext:sdes:mid",
        "a=sendrecv",
        "a=msid:4f1d2a9e-6c3b-4d58-9e2f-0a1b2c3d4e5f 9b8c7d6e-5f4a-3b2c-1d0e-f9e8d7c6b5a4",
        "a=rtcp-mux",
        "a=rtcp-rsize",
        "a=rtpmap:96 VP8/90000",
        "a=rtcp-fb:96 goog-remb",
        "a=rtcp-fb:96 transport-cc",
        "a=rtcp-fb:96 ccm fir",
        "a=rtcp-fb:96 nack",
        "a=rtcp-fb:96 nack pli",
        "a=rtpmap:97 rtx/90000",
        "a=fmtp:97 apt=96",
        "a=rtpmap:98 VP9/90000",
        "a=rtcp-fb:98 nack pli",
        "a=fmtp:98 profile-id=0",
        "a=rtpmap:99 rtx/90000",
        "a=fmtp:99 apt=98",
        "a=rtpmap:100 H264/90000",
        "a=rtcp-fb:100 nack pli",
        "a=fmtp:100 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f",
        "a=rtpmap:101 rtx/90000",
        "a=fmtp:101 apt=100",
        "a=rtpmap:35 AV1/90000",
        "a=fmtp:35 level-idx=5;profile=0;tier=0",
        "a=rtpmap:36 rtx/90000",
        "a=fmtp:36 apt=35",
        "a=rtpmap:102 red/90000",
        "a=rtpmap:103 ulpfec/90000",
        "a=ssrc-group:FID 1111111111 2222222222",
        "a=ssrc:1111111111 cname:abcdEFGHijkl",
        "a=ssrc:1111111111 msid:4f1d2a9e-6c3b-4d58-9e2f-0a1b2c3d4e5f 9b8c7d6e-5f4a-3b2c-1d0e-f9e8d7c6b5a4",
        "a=ssrc:2222222222 cname:abcdEFGHijkl",
        "m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8",
        "c=IN IP4 0.0.0.0",
        "a=rtcp:9 IN IP4 0.0.0.0",
        "a=ice-ufrag:Qx3v",
        "a=ice-pwd:7nPqD1kB2mZ9rXyT4wLs0aEf",
        "a=ice-options:trickle",
        f"a=fingerprint:sha-256 {FINGERPRINT}",
        "a=setup:actpass",
        "a=mid:1",
        "a=extmap:9 urn:ietf:params:rtp-hdrext:sdes:mid",
        "a=sendrecv",
        "a=rtcp-mux",
        "a=rtpmap:111 opus/48000/2",
        "a=fmtp:111 minptime=10;useinbandfec=1",
        "a=rtpmap:63 red/48000/2",
        "a=rtpmap:9 G722/8000",
        "a=rtpmap:0 PCMU/8000",
        "a=rtpmap:8 PCMA/8000",
        "a=ssrc:3333333333 cname:abcdEFGHijkl",
        "",
    ]
)


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
