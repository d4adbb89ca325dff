"""Answer video with the one codec the fan-out encodes, whatever order the offer listed its codecs in.

aiortc negotiates in the offer's order and sends with the first codec, while the fan-out hands the sender
packets of one codec (VP8 unless only H.264 was offered): an offer listing H.264 first got VP8 packets
labelled H.264. The same holds for a WHEP viewer that lists VP8 first watching an H.264 session: the interop
matrix's libdatachannel viewer of an OBS-style publisher (bench.interop), Chromium's /watch page.
`answer_video_codec` keeps only that codec's formats and their RTX on every video transceiver, before the
answer is made; `only_codec` does the same for a list (Opus for audio). On an unchecked aiortc nothing
changes.
"""

from __future__ import annotations

from aiortc import RTCPeerConnection
from aiortc.rtcrtpparameters import RTCRtpCodecParameters

from gateway.webrtc import compat


def only_codec(
    codecs: list[RTCRtpCodecParameters], codec: str, kind: str = "video"
) -> list[RTCRtpCodecParameters]:
    """`codecs` reduced to the formats of `codec` (e.g. "VP8", or "opus" with kind="audio") and their RTX
    formats, order kept."""
    wanted = f"{kind}/{codec.lower()}"
    payload_types = {c.payloadType for c in codecs if c.mimeType.lower() == wanted}

    def keep(c: RTCRtpCodecParameters) -> bool:
        if c.mimeType.lower() == f"{kind}/rtx":
            return c.parameters.get("apt") in payload_types
        return c.mimeType.lower() == wanted

    return [c for c in codecs if keep(c)]


def answer_video_codec(pc: RTCPeerConnection, codec: str) -> int:
    """Restrict the answer's video formats to `codec` (see the module docstring). Returns the transceivers
    changed; one left with no format of `codec` is not touched (aiortc then fails the answer as before)."""
    if compat.refused("the video codec answer"):
        return 0
    changed = 0
    for transceiver in pc.getTransceivers():
        codecs: list[RTCRtpCodecParameters] | None = compat.codecs(transceiver)
        if transceiver.kind != "video" or not codecs:
            continue
        kept = only_codec(codecs, codec)
        if kept and len(kept) != len(codecs):
            compat.set_codecs(transceiver, kept)
            changed += 1
    return changed
