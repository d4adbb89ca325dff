"""Read the feedback a receiver sends one of our senders (REMB, report loss, round trips) into callbacks.

aiortc acts on REMB only for encoders it runs, and we send pre-encoded packets, so this wraps that sender's
`_handle_rtcp_packet` (the original runs first). aiortc keeps only its latest sender report's LSR; this also
wraps `_send_rtcp` to remember when each of the last `SR_HISTORY` reports left, keyed by the LSR a receiver
echoes, read as the report went out (after `sync.sender_clock` rewrote it: `gateway.webrtc.install`'s order).
Keyframe requests (PLI, FIR) go to the encoder that feeds the sender: `route_keyframe_requests` replaces its
`_send_keyframe`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiortc import RTCRtpSender

from gateway.webrtc import chain, compat

logger = logging.getLogger(__name__)

RTCP_PSFB_APP = 15  # payload-specific feedback, application layer: REMB
SR_HISTORY = 16
LAYER = "receiver feedback"
KEYFRAME_LAYER = "keyframe requests to the encoder"


def route_keyframe_requests(sender: RTCRtpSender, request: Callable[[], None]) -> bool:
    """PLI/FIR that reach `sender` call `request()` instead of aiortc's own encoder (a sender of encoded
    packets cannot make a keyframe); False (nothing changed) on an unchecked aiortc."""
    if compat.refused(KEYFRAME_LAYER) or not hasattr(sender, compat.SENDER_SEND_KEYFRAME):
        return False
    chain.wrap(sender, compat.SENDER_SEND_KEYFRAME, KEYFRAME_LAYER, lambda _stock: lambda: request())
    return True


def watch_sender_feedback(
    sender: RTCRtpSender,
    on_remb: Callable[[float, float], None],
    on_loss: Callable[[float, float], None],
    on_rtt: Callable[[float, float], None] | None = None,
) -> bool:
    """Call `on_remb(bps, now)` for each REMB naming this sender's SSRC, `on_loss(fraction, now)` for each
    receiver report block about it and `on_rtt(seconds, now)` for each such block that answers one of our
    recent sender reports (now = time.monotonic())."""
    if compat.refused("receiver feedback to the encoder (it keeps a fixed bitrate)"):
        return False
    try:
        from aiortc.rtp import RtcpPsfbPacket, RtcpRrPacket, RtcpSrPacket, unpack_remb_fci
    except ImportError:
        logger.warning("no RTCP packet types in aiortc.rtp: the encoder keeps a fixed bitrate")
        return False
    if not hasattr(sender, compat.HANDLE_RTCP_PACKET) or not hasattr(sender, compat.SENDER_SSRC):
        logger.warning("this aiortc's RTCP handling is unknown: the encoder keeps a fixed bitrate")
        return False

    sent_at: dict[int, float] = {}  # LSR value -> when that sender report left
    if on_rtt is not None and hasattr(sender, compat.SEND_RTCP):

        def make_send(send_rtcp: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
            async def send(packets: Any) -> None:
                await send_rtcp(packets)
                now = time.monotonic()
                for packet in packets if isinstance(packets, list) else ():
                    if isinstance(packet, RtcpSrPacket) and packet.ssrc == compat.ssrc(sender):
                        sent_at[(packet.sender_info.ntp_timestamp >> 16) & 0xFFFFFFFF] = now
                        while len(sent_at) > SR_HISTORY:
                            del sent_at[next(iter(sent_at))]

            return send

        chain.wrap(sender, compat.SEND_RTCP, LAYER, make_send)

    def make_handle(original: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
        async def handle_rtcp_packet(packet: Any) -> None:
            await original(packet)
            now = time.monotonic()
            if isinstance(packet, RtcpRrPacket | RtcpSrPacket):
                for report in packet.reports:
                    if report.ssrc == compat.ssrc(sender):
                        # the round trip first: the loss callback may raise the rate, and must see this queue
                        left = sent_at.get(report.lsr) if report.lsr else None
                        if on_rtt is not None and left is not None:
                            rtt = now - left - report.dlsr / 65536.0
                            if rtt >= 0:
                                on_rtt(rtt, now)
                        on_loss(report.fraction_lost / 256.0, now)
            elif isinstance(packet, RtcpPsfbPacket) and packet.fmt == RTCP_PSFB_APP:
                try:
                    bitrate, ssrcs = unpack_remb_fci(packet.fci)
                except ValueError:
                    return
                if compat.ssrc(sender) in ssrcs:
                    on_remb(float(bitrate), now)

        return handle_rtcp_packet

    chain.wrap(sender, compat.HANDLE_RTCP_PACKET, LAYER, make_handle)
    return True
