"""Transport-wide congestion control feedback for publishers (gateway.media.transport_feedback is the format).

Why: a browser publisher (libwebrtc) runs its full Google Congestion Control, a delay-based estimate from
per-packet arrival times plus probing, only when the answer negotiates transport-cc. aiortc answers
without it (its capabilities list neither the `transport-cc` RTCP feedback nor the transport-wide sequence
number extension), so browsers fell back to aiortc's once-a-second REMB and their loss-based rule: through a
bottleneck they learned of a full link only from the loss they had already caused.

Two parts, both per peer connection:
- `answer_transport_cc(pc)`, after `setRemoteDescription(offer)` and before `createAnswer()`: on each video
  m-line whose offer has both the extension and `a=rtcp-fb:<pt> transport-cc`, keep both in the answer
  (the offer's extension id; aiortc's own header extension map already parses the extension).
- `install(receiver)`: records each arriving packet's transport-wide sequence number and arrival time (a
  wrapper of that one receiver's `_handle_rtp_packet`, so retransmissions and padding probes count too),
  and `TransportCcFeedback.run` sends what arrived every `interval_s` (libwebrtc sends every 50-250 ms,
  50 ms at these rates) through the receiver's own `_send_rtcp`.

The REMB the gateway sends (aiortc's estimate under the loss/queue cap of gateway.media.uplink_rate) still
goes out: libwebrtc takes a REMB as an upper bound next to its own estimate.

Version guard: `_handle_rtp_packet`, `_send_rtcp`, `_RTCRtpReceiver__rtcp_ssrc`, `RTCRtpTransceiver._codecs`
and `_headerExtensions` (aiortc 1.14-1.16, as gateway.rtc.receive); elsewhere nothing is changed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiortc import RTCPeerConnection, RTCRtpReceiver
from aiortc.rtcrtpparameters import RTCRtcpFeedback, RTCRtpHeaderExtensionParameters
from aiortc.rtp import RtpPacket
from aiortc.sdp import SessionDescription

from gateway.media.transport_feedback import FeedbackRecorder
from gateway.rtc.receive import TESTED_AIORTC, _aiortc_version

logger = logging.getLogger(__name__)

TRANSPORT_CC_URI = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
TRANSPORT_CC = "transport-cc"
_RTCP_SSRC_ATTR = "_RTCRtpReceiver__rtcp_ssrc"
_MARK = "_livefuse_transport_cc"


def _offered(sdp: str) -> dict[str, tuple[RTCRtpHeaderExtensionParameters, set[int]]]:
    """Per video mid of an offer: its transport-wide sequence number extension and the payload types that
    offered transport-cc feedback (only m-lines with both)."""
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
    if remote is None or not (TESTED_AIORTC[0] <= _aiortc_version() <= TESTED_AIORTC[1]):
        return 0
    offered = _offered(remote.sdp)
    changed = 0
    for transceiver in pc.getTransceivers():
        entry = offered.get(transceiver.mid or "")
        codecs = getattr(transceiver, "_codecs", None)
        extensions = getattr(transceiver, "_headerExtensions", None)
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
        rtcp_ssrc = getattr(self._receiver, _RTCP_SSRC_ATTR, None)
        if rtcp_ssrc is None or not self.recorder.pending:
            return 0
        packets = self.recorder.take(rtcp_ssrc, self._media_ssrc)
        for data in packets:
            await self._receiver._send_rtcp(_Rtcp(data))  # type: ignore[arg-type]
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
    if not (TESTED_AIORTC[0] <= _aiortc_version() <= TESTED_AIORTC[1]):
        return None
    existing = getattr(receiver, _MARK, None)
    if isinstance(existing, TransportCcFeedback):
        return existing
    original = getattr(receiver, "_handle_rtp_packet", None)
    if original is None or not hasattr(receiver, "_send_rtcp") or not hasattr(receiver, _RTCP_SSRC_ATTR):
        return None
    feedback = TransportCcFeedback(receiver, interval_s)

    async def handle_rtp_packet(packet: RtpPacket, arrival_time_ms: int) -> None:
        feedback.on_packet(packet, time.monotonic_ns() // 1000)
        await original(packet, arrival_time_ms)

    receiver._handle_rtp_packet = handle_rtp_packet  # type: ignore[method-assign]
    setattr(receiver, _MARK, feedback)
    return feedback
