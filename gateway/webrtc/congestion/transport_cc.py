"""Transport-cc: per-packet arrival feedback, both directions, where the offer negotiates it.

aiortc answers without transport-cc, so a browser publisher falls back to REMB and loss. Receive side:
`answer_transport_cc` keeps the extension and `transport-cc` feedback in the answer, `install` records each
arriving packet's transport-wide sequence number (wrapping the receiver's `_handle_rtp_packet`) and
`TransportCcFeedback.run` reports them every `interval_s`. Send side: `install_send_side` stamps every RTP
packet of one video sender on its way into the DTLS transport and matches the feedback that comes back
(`send_history`) into one-way transit samples for the bitrate policy. The packet format:
`transport_feedback`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiortc import RTCPeerConnection, RTCRtpReceiver, RTCRtpSender
from aiortc.rtcrtpparameters import RTCRtcpFeedback, RTCRtpHeaderExtensionParameters, RTCRtpParameters
from aiortc.rtp import HeaderExtensionsMap, RtpPacket, is_rtcp
from aiortc.sdp import SessionDescription

from gateway.webrtc import chain, compat
from gateway.webrtc.congestion.send_history import FeedbackSample, SendHistory
from gateway.webrtc.congestion.transport_feedback import (
    RTCP_RTPFB,
    TRANSPORT_CC_FMT,
    FeedbackRecorder,
    parse_feedback,
)

logger = logging.getLogger(__name__)

TRANSPORT_CC_URI = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
TRANSPORT_CC = "transport-cc"
_MARK = "_livefuse_transport_cc"
_SEND_MARK = "_livefuse_transport_cc_send"
RECEIVE_LAYER = "transport-cc recorder"
SEND_LAYER = "transport-cc send side"


def offered_transport_cc(sdp: str) -> dict[str, tuple[RTCRtpHeaderExtensionParameters, set[int]]]:
    """Per video mid of an offer (or answer): its transport-wide sequence number extension and the payload
    types with transport-cc feedback (only m-lines with both)."""
    offered: dict[str, tuple[RTCRtpHeaderExtensionParameters, set[int]]] = {}
    for media in SessionDescription.parse(sdp).media:
        if media.kind != "video" or media.rtp.muxId is None:
            continue
        extension = next((e for e in media.rtp.headerExtensions if e.uri == TRANSPORT_CC_URI), None)
        payload_types = {
            c.payloadType
            for c in media.rtp.codecs
            if c.payloadType is not None and any(f.type == TRANSPORT_CC for f in c.rtcpFeedback)
        }
        if extension is not None and payload_types:
            offered[media.rtp.muxId] = (extension, payload_types)
    return offered


def answer_transport_cc(pc: RTCPeerConnection) -> int:
    """Keep transport-cc in the answer of every video m-line that offered it (see the module docstring).
    Returns the transceivers changed."""
    remote = pc.remoteDescription
    if remote is None or compat.refused("transport-cc"):
        return 0
    offered = offered_transport_cc(remote.sdp)
    changed = 0
    for transceiver in pc.getTransceivers():
        entry = offered.get(transceiver.mid or "")
        codecs = compat.codecs(transceiver)
        extensions = compat.header_extensions(transceiver)
        if transceiver.kind != "video" or entry is None or not codecs or extensions is None:
            continue
        extension, payload_types = entry
        for codec in codecs:
            has = any(f.type == TRANSPORT_CC for f in codec.rtcpFeedback)
            if codec.payloadType in payload_types and not has:
                codec.rtcpFeedback.append(RTCRtcpFeedback(type=TRANSPORT_CC))
        if not any(e.uri == TRANSPORT_CC_URI for e in extensions):
            extensions.append(RTCRtpHeaderExtensionParameters(id=extension.id, uri=extension.uri))
        changed += 1
    return changed


class _Rtcp:
    """An RTCP packet already serialised, for aiortc's `_send_rtcp` (which sends `bytes(packet)`)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __bytes__(self) -> bytes:
        return self.data


class TransportCcFeedback:
    """The transport-cc feedback of one publisher's video receiver (see the module docstring)."""

    def __init__(self, receiver: RTCRtpReceiver, interval_s: float = 0.05) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.interval_s = interval_s
        self.recorder = FeedbackRecorder()
        self._receiver = receiver
        self._media_ssrc = 0
        self.bytes_sent = 0

    def on_packet(self, packet: RtpPacket, arrival_us: int) -> None:
        sequence = packet.extensions.transport_sequence_number
        if sequence is not None:
            self.recorder.add(sequence, arrival_us)
            self._media_ssrc = packet.ssrc

    async def flush(self) -> int:
        """Send what arrived since the last flush; the number of feedback packets sent."""
        rtcp_ssrc = compat.rtcp_ssrc(self._receiver)
        if rtcp_ssrc is None or not self.recorder.pending:
            return 0
        packets = self.recorder.take(rtcp_ssrc, self._media_ssrc)
        for data in packets:
            await compat.send_rtcp(self._receiver)(_Rtcp(data))
            self.bytes_sent += len(data)
        return len(packets)

    async def run(self) -> None:
        """Flush every `interval_s` until cancelled or the transport is gone."""
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.flush()
            except ConnectionError:
                return

    def stats(self) -> dict[str, Any]:
        return {
            "packets_recorded": self.recorder.packets_recorded,
            "feedback_sent": self.recorder.packets_sent,
            "feedback_kbytes": round(self.bytes_sent / 1000, 1),
        }


def install(receiver: RTCRtpReceiver, interval_s: float = 0.05) -> TransportCcFeedback | None:
    """Record `receiver`'s transport-wide sequence numbers (a no-op for packets without them, i.e. when the
    answer did not negotiate transport-cc); None where this aiortc's receiver is not the tested one."""
    if compat.refused("transport-cc"):
        return None
    existing = getattr(receiver, _MARK, None)
    if isinstance(existing, TransportCcFeedback):
        return existing
    needed = (compat.RECEIVER_HANDLE_RTP_PACKET, compat.SEND_RTCP, compat.RECEIVER_RTCP_SSRC)
    if not all(hasattr(receiver, name) for name in needed):
        return None
    feedback = TransportCcFeedback(receiver, interval_s)

    def make(
        original: Callable[[RtpPacket, int], Awaitable[None]],
    ) -> Callable[[RtpPacket, int], Awaitable[None]]:
        async def handle_rtp_packet(packet: RtpPacket, arrival_time_ms: int) -> None:
            feedback.on_packet(packet, time.monotonic_ns() // 1000)
            await original(packet, arrival_time_ms)

        return handle_rtp_packet

    chain.wrap(receiver, compat.RECEIVER_HANDLE_RTP_PACKET, RECEIVE_LAYER, make)
    setattr(receiver, _MARK, feedback)
    return feedback


def transport_feedback_packets(data: bytes) -> list[bytes]:
    """The transport-cc packets in one (compound) RTCP datagram."""
    found: list[bytes] = []
    pos = 0
    while pos + 4 <= len(data):
        size = 4 * (int.from_bytes(data[pos + 2 : pos + 4], "big") + 1)
        if data[pos + 1] == RTCP_RTPFB and data[pos] & 0x1F == TRANSPORT_CC_FMT:
            found.append(data[pos : pos + size])
        pos += size
    return found


class SendSideFeedback:
    """Transport-wide sequence numbers on one video sender's packets, and the feedback they earn (see the
    module docstring)."""

    def __init__(
        self, extensions: list[RTCRtpHeaderExtensionParameters], ssrcs: set[int],
        on_sample: Callable[[FeedbackSample], None],
    ) -> None:  # fmt: skip
        self.history = SendHistory()
        self.ssrcs = ssrcs
        self.on_sample = on_sample
        self.extensions = HeaderExtensionsMap()
        self.extensions.configure(RTCRtpParameters(headerExtensions=extensions))
        self._next = 0
        self.stamped = 0
        self.malformed = 0
        self.errors = 0  # unexpected failures in stamp / on_rtcp (the packet goes on unchanged)

    def stamp(self, data: bytes) -> bytes:
        """One outgoing datagram, stamped when it is an RTP packet of our video sender."""
        if len(data) < 12 or is_rtcp(data) or int.from_bytes(data[8:12], "big") not in self.ssrcs:
            return data
        try:
            packet = RtpPacket.parse(data, self.extensions)
        except ValueError:
            return data
        sequence = self._next
        self._next = (self._next + 1) & 0xFFFF
        packet.extensions.transport_sequence_number = sequence
        stamped = packet.serialize(self.extensions)
        self.history.sent(sequence, time.monotonic(), len(stamped))
        self.stamped += 1
        return stamped

    def on_rtcp(self, data: bytes) -> None:
        for raw in transport_feedback_packets(data):
            try:
                feedback = parse_feedback(raw)
            except ValueError:
                self.malformed += 1
                continue
            self.on_sample(self.history.on_feedback(feedback))

    def stats(self) -> dict[str, Any]:
        return {"stamped": self.stamped, "feedback_received": self.history.feedback_packets,
                "malformed": self.malformed, "errors": self.errors}  # fmt: skip


def negotiated_extensions(
    pc: RTCPeerConnection, sender: RTCRtpSender
) -> list[RTCRtpHeaderExtensionParameters]:
    """The header extensions negotiated on `sender`'s transceiver, if transport-cc is among them (else [])."""
    for transceiver in pc.getTransceivers():
        if transceiver.sender is sender:
            extensions = list(compat.header_extensions(transceiver) or [])
            if any(e.uri == TRANSPORT_CC_URI for e in extensions):
                return extensions
    return []


def install_send_side(
    pc: RTCPeerConnection, sender: RTCRtpSender, on_sample: Callable[[FeedbackSample], None]
) -> SendSideFeedback | None:
    """Stamp `sender`'s packets and read the feedback (after the answer is made: its transceiver's
    negotiated extensions and its final, bundled, DTLS transport); None where transport-cc was not
    negotiated or this aiortc is not the tested one."""
    if compat.refused("transport-cc"):
        return None
    extensions = negotiated_extensions(pc, sender)
    transport = sender.transport
    ssrcs = compat.media_ssrcs(sender)
    hooks = (compat.DTLS_SEND_RTP, compat.DTLS_HANDLE_RTCP_DATA)
    if not extensions or not all(hasattr(transport, name) for name in hooks) or not ssrcs:
        return None
    if getattr(transport, _SEND_MARK, None) is not None:
        return None  # one video sender per peer connection here; never stamp twice
    side = SendSideFeedback(extensions, {int(s) for s in ssrcs if s is not None}, on_sample)

    def make_send(send_rtp: Callable[[bytes], Awaitable[None]]) -> Callable[[bytes], Awaitable[None]]:
        async def send(data: bytes) -> None:
            try:
                data = side.stamp(data)
            except Exception:  # noqa: BLE001  (the media path must not fail on our extension)
                side.errors += 1
                if side.errors == 1:
                    logger.exception("transport-cc: could not stamp a packet; sent as it was (logged once)")
            await send_rtp(data)

        return send

    def make_handle(handle_rtcp: Callable[[bytes], Awaitable[None]]) -> Callable[[bytes], Awaitable[None]]:
        async def handle(data: bytes) -> None:
            try:
                side.on_rtcp(data)
            except Exception:  # noqa: BLE001  (aiortc's own RTCP handling comes first)
                side.errors += 1
                if side.errors == 1:
                    logger.exception("transport-cc: feedback not applied (logged once)")
            await handle_rtcp(data)

        return handle

    chain.wrap(transport, compat.DTLS_SEND_RTP, SEND_LAYER, make_send)
    chain.wrap(transport, compat.DTLS_HANDLE_RTCP_DATA, SEND_LAYER, make_handle)
    setattr(transport, _SEND_MARK, side)
    return side
