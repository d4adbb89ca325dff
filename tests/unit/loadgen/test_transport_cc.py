"""loadgen --transport-cc: the offer it sends and the answer it reads (loadgen.transport_cc)."""

from __future__ import annotations

from gateway.webrtc.congestion.transport_cc import TRANSPORT_CC_URI
from loadgen.transport_cc import answered_id, offer_with_transport_cc

OFFER = "\r\n".join([
    "v=0", "o=- 1 1 IN IP4 0.0.0.0", "s=-", "t=0 0", "a=group:BUNDLE 0 1",
    "m=audio 9 UDP/TLS/RTP/SAVPF 111", "a=mid:0", "a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid",
    "a=extmap:2 urn:ietf:params:rtp-hdrext:ssrc-audio-level", "a=rtpmap:111 opus/48000/2",
    "m=video 9 UDP/TLS/RTP/SAVPF 97 98", "a=mid:1", "a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid",
    "a=extmap:3 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time", "a=rtpmap:97 VP8/90000",
    "a=rtcp-fb:97 nack", "a=rtpmap:98 rtx/90000", "a=fmtp:98 apt=97", "",
])  # fmt: skip


def test_the_offer_gets_a_free_id_and_feedback_on_video_formats_only() -> None:
    offer = offer_with_transport_cc(OFFER)
    audio, video = offer.split("m=video")
    assert TRANSPORT_CC_URI not in audio and "transport-cc" not in audio
    assert f"a=extmap:4 {TRANSPORT_CC_URI}" in video  # 1, 2, 3 are taken
    lines = video.split("\r\n")
    assert (
        lines.index(f"a=extmap:4 {TRANSPORT_CC_URI}")
        == lines.index("a=extmap:3 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time") + 1
    )
    assert "a=rtcp-fb:97 transport-cc" in video and "a=rtcp-fb:98 transport-cc" not in video
    assert offer_with_transport_cc(offer) == offer  # already there: unchanged


def test_the_answered_id_is_read_from_the_video_section() -> None:
    assert answered_id(offer_with_transport_cc(OFFER)) == 4
    assert answered_id(OFFER) is None
