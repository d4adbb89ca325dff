"""One video codec kept from an offer, with its retransmission (rtx) entries."""

from __future__ import annotations

from gateway.webrtc.negotiation.video_codecs import only_codec


def test_only_codec_keeps_the_codec_and_its_rtx() -> None:
    from aiortc.rtcrtpparameters import RTCRtpCodecParameters

    def fmt(mime: str, pt: int, **params: object) -> RTCRtpCodecParameters:
        return RTCRtpCodecParameters(mimeType=mime, clockRate=90000, payloadType=pt, parameters=dict(params))

    offered = [
        fmt("video/H264", 102, **{"profile-level-id": "42e01f"}),
        fmt("video/rtx", 103, apt=102),
        fmt("video/VP8", 96),
        fmt("video/rtx", 97, apt=96),
        fmt("video/H264", 104, **{"profile-level-id": "42001f"}),
    ]
    assert [c.payloadType for c in only_codec(offered, "VP8")] == [96, 97]
    assert [c.payloadType for c in only_codec(offered, "H264")] == [102, 103, 104]
    assert only_codec(offered, "AV1") == []
