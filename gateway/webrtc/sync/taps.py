"""Taps on one aiortc receiver: encoded audio packets without decoding, and the sender's reports.

A relay that forwards Opus untouched needs the packets, not PCM: `tap_audio_packets` swaps the audio
receiver's jitter buffer for `PacketTap`, which hands each packet on and never releases a frame (the
decoder idles; receiver reports and NACKs go on). `tap_sender_reports` wraps the receiver's
`_handle_rtcp_packet` to see each SR's full NTP time (aiortc keeps only 32 bits). On an unchecked aiortc
nothing changes and audio is answered inactive rather than relayed wrong.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiortc import RTCRtpReceiver
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtcpSrPacket, RtpPacket

from gateway.webrtc import chain, compat
from gateway.webrtc.sync.clocks import ntp64_to_seconds

logger = logging.getLogger(__name__)

_TAP_MARK = "_livefuse_sr_tap"
REPORT_LAYER = "sender report tap"

PacketCallback = Callable[[RtpPacket], None]
ReportCallback = Callable[[float, int], None]  # (publisher NTP seconds, RTP timestamp)


class PacketTap(JitterBuffer):
    """A 'jitter buffer' that hands every packet on at once and never assembles a frame.

    No buffering on purpose: a relay's receivers (browsers, aiortc) run their own jitter buffers, and one
    more here would only add delay. Order and loss are the far end's business, as with any RTP relay.
    """

    def __init__(self, on_packet: PacketCallback) -> None:
        super().__init__(capacity=16)
        self._on_packet = on_packet
        self.packets = 0

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        self.packets += 1
        self._on_packet(packet)
        return False, None


def _supported() -> bool:
    return not compat.refused("the receive taps (audio relay, sender reports)")


def tap_audio_packets(receiver: RTCRtpReceiver, on_packet: PacketCallback) -> PacketTap | None:
    """Route `receiver`'s packets to `on_packet` instead of the Opus decoder. Call before media flows."""
    if not _supported():
        return None
    current = compat.jitter_buffer(receiver)
    if isinstance(current, PacketTap):
        return current
    if not isinstance(current, JitterBuffer) or not compat.jitter_buffer_unused(current):
        return None  # unknown internals, or packets already buffered
    tap = PacketTap(on_packet)
    compat.set_jitter_buffer(receiver, tap)
    return tap


def tap_sender_reports(receiver: RTCRtpReceiver, on_report: ReportCallback) -> bool:
    """Call `on_report(ntp_seconds, rtp_timestamp)` for every SR the remote sender sends on `receiver`."""
    if not _supported() or getattr(receiver, _TAP_MARK, False):
        return False

    def make(original: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
        async def handle(packet: Any) -> None:
            if isinstance(packet, RtcpSrPacket):
                info = packet.sender_info
                on_report(ntp64_to_seconds(info.ntp_timestamp), info.rtp_timestamp)
            await original(packet)

        return handle

    chain.wrap(receiver, compat.HANDLE_RTCP_PACKET, REPORT_LAYER, make)
    setattr(receiver, _TAP_MARK, True)
    return True


def decoded_pts_origin(receiver: RTCRtpReceiver) -> int | None:
    """The RTP timestamp that aiortc maps to pts 0 for decoded frames (None before the first frame)."""
    origin = compat.pts_origin(receiver)
    return origin if isinstance(origin, int) else None
