"""Answer video with the one codec the fan-out encodes, whatever order the offer listed its codecs in.

Why: aiortc negotiates an answer's codecs in `setRemoteDescription(offer)`, in the OFFER's order, and its
sender then sends with the first one. Codec preferences set afterwards (`setCodecPreferences`) do not change
that answer. The gateway's fan-out encoder hands the sender packets already encoded in one codec (VP8 unless
only H.264 was offered), so an offer that lists H.264 before VP8 (Safari, many hardware and GStreamer
publishers) got VP8 packets sent and labelled as H.264: connected, and not one frame decodable.

`answer_video_codec(pc, codec)` keeps, on every video transceiver, only the formats of `codec` and the RTX
formats that repair them, after `setRemoteDescription(offer)` and before `createAnswer()`. It edits aiortc's
negotiated `RTCRtpTransceiver._codecs` (checked against aiortc 1.14-1.16); a transceiver without that
attribute is left as aiortc made it.
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
        codecs: list[RTCRtpCodecParameters] | None = getattr(transceiver, compat.TRANSCEIVER_CODECS, None)
        if transceiver.kind != "video" or not codecs:
            continue
        kept = only_codec(codecs, codec)
        if kept and len(kept) != len(codecs):
            setattr(transceiver, compat.TRANSCEIVER_CODECS, kept)
            changed += 1
    return changed
