"""Which audio transceiver carries the relayed Opus, in which direction; every other audio m-line inactive.

Why Opus only: the relay forwards packets untouched, so the codec the publisher sends is the codec every
viewer must take, and Opus is the one every WebRTC endpoint has (RFC 7874). A publisher that offers only
other audio codecs keeps its video session; its audio is answered `inactive`, as is a viewer's audio when
the session has none to give.

The chosen transceiver's negotiated formats are cut to Opus the way `gateway.webrtc.negotiation.video_codecs`
cuts video's (its
`_codecs`, after `setRemoteDescription`): codec preferences set at that point no longer change the answer,
so an offer listing PCMU before Opus was answered with both, and aiortc's sender labelled the relayed Opus
as PCMU.
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
    return any(c.mimeType.lower() == OPUS for c in getattr(transceiver, compat.TRANSCEIVER_CODECS))


def _opus_only(transceiver: RTCRtpTransceiver) -> None:
    codecs = getattr(transceiver, compat.TRANSCEIVER_CODECS)
    setattr(transceiver, compat.TRANSCEIVER_CODECS, only_codec(codecs, "opus", kind="audio"))


def audio_transceivers(pc: RTCPeerConnection) -> list[RTCRtpTransceiver]:
    return [t for t in pc.getTransceivers() if t.kind == "audio"]


def accept_publisher_audio(pc: RTCPeerConnection) -> RTCRtpTransceiver | None:
    """After setRemoteDescription of a WHIP offer: receive the first Opus audio the publisher sends
    (the answer says `recvonly`: the publisher does not get its own sound back). None: no usable audio."""
    chosen = None
    for transceiver in audio_transceivers(pc):
        offered = getattr(transceiver, compat.TRANSCEIVER_OFFER_DIRECTION, None)
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
        offered = getattr(transceiver, compat.TRANSCEIVER_OFFER_DIRECTION, None)
        receives = offered in ("sendonly", "sendrecv")  # our view
        if chosen is None and session_has_audio and receives and _offers_opus(transceiver):
            _opus_only(transceiver)
            transceiver.direction = "sendonly"
            chosen = transceiver
        else:
            transceiver.direction = "inactive"
    return chosen
