"""Read the bandwidth feedback a receiver sends back to one of our `RTCRtpSender`s (REMB, receiver-report
loss) and hand it to a callback. aiortc handles these RTCP packets itself (REMB only for encoders it runs;
we send pre-encoded packets), so this wraps that one sender's `_handle_rtcp_packet` (an instance attribute;
other senders are untouched), calls the original first, then reports.

Version guard: aiortc 1.14-1.16 (`RTCRtpSender._handle_rtcp_packet`, `_ssrc`, the RTCP packet types and
`unpack_remb_fci` in `aiortc.rtp`).
Without them nothing is wrapped and `watch_sender_feedback` returns False: the encoder keeps its bitrate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from aiortc import RTCRtpSender

logger = logging.getLogger(__name__)

RTCP_PSFB_APP = 15  # payload-specific feedback, application layer: REMB


def watch_sender_feedback(
    sender: RTCRtpSender,
    on_remb: Callable[[float, float], None],
    on_loss: Callable[[float, float], None],
) -> bool:
    """Call `on_remb(bps, now)` for each REMB naming this sender's SSRC and `on_loss(fraction, now)` for each
    receiver report block about it (now = time.monotonic())."""
    try:
        from aiortc.rtp import RtcpPsfbPacket, RtcpRrPacket, RtcpSrPacket, unpack_remb_fci
    except ImportError:
        logger.warning("no RTCP packet types in aiortc.rtp: the encoder keeps a fixed bitrate")
        return False
    original = getattr(sender, "_handle_rtcp_packet", None)
    if original is None or not hasattr(sender, "_ssrc"):
        logger.warning("this aiortc's RTCP handling is unknown: the encoder keeps a fixed bitrate")
        return False

    async def handle_rtcp_packet(packet: Any) -> None:
        await original(packet)
        now = time.monotonic()
        if isinstance(packet, RtcpRrPacket | RtcpSrPacket):
            for report in packet.reports:
                if report.ssrc == sender._ssrc:
                    on_loss(report.fraction_lost / 256.0, now)
        elif isinstance(packet, RtcpPsfbPacket) and packet.fmt == RTCP_PSFB_APP:
            try:
                bitrate, ssrcs = unpack_remb_fci(packet.fci)
            except ValueError:
                return
            if sender._ssrc in ssrcs:
                on_remb(float(bitrate), now)

    sender._handle_rtcp_packet = handle_rtcp_packet  # type: ignore[method-assign]
    return True
