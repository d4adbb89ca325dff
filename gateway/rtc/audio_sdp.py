"""Which audio transceiver carries the relayed Opus, in which direction; every other audio m-line inactive.

Why Opus only: the relay forwards packets untouched, so the codec the publisher sends is the codec every
viewer must take, and Opus is the one every WebRTC endpoint has (RFC 7874). A publisher that offers only
other audio codecs keeps its video session; its audio is answered `inactive`, as is a viewer's audio when
the session has none to give.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiortc import RTCPeerConnection, RTCRtpSender, RTCRtpTransceiver

OPUS = "audio/opus"


def _offers_opus(transceiver: RTCRtpTransceiver) -> bool:
    return any(c.mimeType.lower() == OPUS for c in transceiver._codecs)


def _opus_only(transceiver: RTCRtpTransceiver) -> None:
    caps = RTCRtpSender.getCapabilities("audio").codecs
    transceiver.setCodecPreferences([c for c in caps if c.mimeType.lower() == OPUS])


def audio_transceivers(pc: RTCPeerConnection) -> list[RTCRtpTransceiver]:
    return [t for t in pc.getTransceivers() if t.kind == "audio"]


def accept_publisher_audio(pc: RTCPeerConnection) -> RTCRtpTransceiver | None:
    """After setRemoteDescription of a WHIP offer: receive the first Opus audio the publisher sends
    (the answer says `recvonly`: the publisher does not get its own sound back). None: no usable audio."""
    chosen = None
    for transceiver in audio_transceivers(pc):
        sends = getattr(transceiver, "_offerDirection", None) in ("recvonly", "sendrecv")  # our view
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
        receives = getattr(transceiver, "_offerDirection", None) in ("sendonly", "sendrecv")  # our view
        if chosen is None and session_has_audio and receives and _offers_opus(transceiver):
            _opus_only(transceiver)
            transceiver.direction = "sendonly"
            chosen = transceiver
        else:
            transceiver.direction = "inactive"
    return chosen


_AIORTC_AUDIO = ("opus", "pcmu", "pcma", "g722")


@dataclass(frozen=True)
class UnusableAudio:
    """An offer's audio m-sections that carry no codec aiortc knows (say L16 or AAC only).

    aiortc refuses a whole offer over one such section ("Failed to set remote audio description"), yet
    the publisher's video is fine and such audio is simply not taken. So aiortc gets a copy of the offer in
    which those sections list PCMU (`for_aiortc`), the section is answered inactive, and the answer that
    goes back names the offer's own first format again (`fix_answer`), as RFC 3264 wants for a declined
    stream."""

    for_aiortc: str
    originals: tuple[tuple[int, str, str], ...] = ()  # (m-section index, first format, its rtpmap line)

    def fix_answer(self, answer: str) -> str:
        if not self.originals:
            return answer
        sections = _split_sections(answer)
        for index, fmt, rtpmap in self.originals:
            if index + 1 >= len(sections):
                continue
            lines = sections[index + 1]
            head = lines[0].split(" ")
            lines[0] = " ".join([*head[:3], fmt])
            kept = [ln for ln in lines[1:] if not ln.startswith(("a=rtpmap:", "a=fmtp:", "a=rtcp-fb:"))]
            sections[index + 1] = [lines[0], *kept, *([rtpmap] if rtpmap else [])]
        return "\r\n".join(ln for section in sections for ln in section)


def _split_sections(sdp: str) -> list[list[str]]:
    """[session lines, m-section 0 lines, m-section 1 lines, ...] (CRLF or LF input, no trailing blank)."""
    sections: list[list[str]] = [[]]
    for line in sdp.replace("\r\n", "\n").split("\n"):
        if line.startswith("m="):
            sections.append([])
        sections[-1].append(line)
    return sections


def neutralize_unusable_audio(sdp: str) -> UnusableAudio:
    """See `UnusableAudio`. Offers whose audio aiortc can negotiate pass unchanged."""
    sections = _split_sections(sdp)
    originals = []
    for index, lines in enumerate(sections[1:]):
        head = lines[0].split(" ")
        if not lines[0].startswith("m=audio") or len(head) < 4:
            continue
        names = [ln.split(" ", 1)[1].split("/")[0].lower() for ln in lines if ln.startswith("a=rtpmap:")]
        static = {"0", "8", "9"} & set(head[3:])
        if static or any(n in _AIORTC_AUDIO for n in names):
            continue
        fmt = head[3]
        rtpmap = next((ln for ln in lines if ln.startswith(f"a=rtpmap:{fmt} ")), "")
        kept = [ln for ln in lines[1:] if not ln.startswith(("a=rtpmap:", "a=fmtp:", "a=rtcp-fb:"))]
        sections[index + 1] = [" ".join([*head[:3], "0"]), *kept, "a=rtpmap:0 PCMU/8000"]
        originals.append((index, fmt, rtpmap))
    if not originals:
        return UnusableAudio(sdp)
    return UnusableAudio("\r\n".join(ln for section in sections for ln in section), tuple(originals))
