"""Which audio m-line carries Opus: the publisher's first Opus audio, a viewer's first that receives.

The publisher's is answered `recvonly` with Opus only (it does not get its own sound back); a viewer's
`sendonly` when the session relays audio; every other audio m-line `inactive`, so the video goes on.
"""

from __future__ import annotations

from aiortc import RTCPeerConnection, RTCRtpTransceiver

from gateway.webrtc import compat
from gateway.webrtc.negotiation.video_codecs import only_codec

OPUS = "audio/opus"


def _offers_opus(transceiver: RTCRtpTransceiver) -> bool:
    """False on an aiortc whose negotiated codecs are unknown: its audio is then answered inactive."""
    if compat.refused("the Opus answer"):
        return False
    return any(c.mimeType.lower() == OPUS for c in compat.codecs(transceiver) or ())


def _opus_only(transceiver: RTCRtpTransceiver) -> None:
    codecs = compat.codecs(transceiver) or []
    compat.set_codecs(transceiver, only_codec(codecs, "opus", kind="audio"))


def audio_transceivers(pc: RTCPeerConnection) -> list[RTCRtpTransceiver]:
    return [t for t in pc.getTransceivers() if t.kind == "audio"]


def accept_publisher_audio(pc: RTCPeerConnection) -> RTCRtpTransceiver | None:
    """After setRemoteDescription of a WHIP offer: receive the first Opus audio the publisher sends
    (the answer says `recvonly`: the publisher does not get its own sound back). None: no usable audio."""
    chosen = None
    for transceiver in audio_transceivers(pc):
        offered = compat.offer_direction(transceiver)
        sends = offered in ("recvonly", "sendrecv")  # our view
        if chosen is None and sends and _offers_opus(transceiver):
            _opus_only(transceiver)
            transceiver.direction = "recvonly"
            chosen = transceiver
        else:
            transceiver.direction = "inactive"
    return chosen


def viewer_audio_transceiver(pc: RTCPeerConnection, session_has_audio: bool) -> RTCRtpTransceiver | None:
    """After setRemoteDescription of a WHEP offer: the audio transceiver to send the relayed Opus on
    (`sendonly`), or None (all audio m-lines answered inactive)."""
    chosen = None
    for transceiver in audio_transceivers(pc):
        offered = compat.offer_direction(transceiver)
        receives = offered in ("sendonly", "sendrecv")  # our view
        if chosen is None and session_has_audio and receives and _offers_opus(transceiver):
            _opus_only(transceiver)
            transceiver.direction = "sendonly"
            chosen = transceiver
        else:
            transceiver.direction = "inactive"
    return chosen
