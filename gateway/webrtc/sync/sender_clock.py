"""Make one sender's RTCP sender reports carry capture time instead of send time.

aiortc stamps each SR with when its last packet was sent; for processed video that is later than capture by
the processing delay, and a receiver would play the sound early by that much. `stamp_sender_reports`
rewrites each SR's NTP time to the capture instant of the media with that RTP timestamp. aiortc adds a
random origin to every timestamp; it is learned when `_next_encoded_frame` is entered again (the previous
frame's packets have all been sent). On an unchecked aiortc, SRs stay send-time based.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiortc import RTCRtpSender
from aiortc.rtp import RtcpSrPacket

from gateway.webrtc import chain, compat
from gateway.webrtc.sync.clocks import Unwrapper

logger = logging.getLogger(__name__)

_MARK = "_livefuse_sr_stamp"
LAYER = "capture-clock sender reports"


@dataclass(eq=False)
class StampState:
    """What one stamped sender learned; `stamped` counts SRs rewritten (tests and metrics read it)."""

    origin: int | None = None
    last_timestamp: int | None = None  # our media timestamp of the frame returned last (unwrapped)
    stamped: int = 0
    unstamped: int = 0


def stamp_sender_reports(sender: RTCRtpSender, capture_of: Callable[[int], int | None]) -> StampState | None:
    """Rewrite `sender`'s SR NTP times with `capture_of(media_timestamp)` (a 64-bit NTP value, or None to
    leave that SR as aiortc made it). Idempotent per sender; None on an untested aiortc."""
    if compat.refused("sender report stamping") or not hasattr(sender, compat.SENDER_RTP_TIMESTAMP):
        return None
    existing = getattr(sender, _MARK, None)
    if isinstance(existing, StampState):
        return existing
    state = StampState()
    unwrap = Unwrapper(first=0)

    def make_next(next_frame: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        async def next_encoded_frame(codec: Any) -> Any:
            if state.origin is None and state.last_timestamp is not None:
                sent = compat.rtp_timestamp(sender)
                state.origin = (sent - state.last_timestamp) & 0xFFFFFFFF
            frame = await next_frame(codec)
            if frame is not None:
                state.last_timestamp = frame.timestamp
                unwrap.last_rel = max(unwrap.last_rel, frame.timestamp)
            return frame

        return next_encoded_frame

    def make_send(send_rtcp: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
        async def send(packets: Any) -> None:
            if state.origin is not None and isinstance(packets, list):
                ssrc = compat.ssrc(sender)
                for packet in packets:
                    if isinstance(packet, RtcpSrPacket) and packet.ssrc == ssrc:
                        media_ts = unwrap.near((packet.sender_info.rtp_timestamp - state.origin) & 0xFFFFFFFF)
                        ntp = capture_of(media_ts)
                        if ntp is None:
                            state.unstamped += 1
                            continue
                        packet.sender_info.ntp_timestamp = ntp
                        # keeps aiortc's RTT estimate
                        compat.set_last_report(sender, (ntp >> 16) & 0xFFFFFFFF)
                        state.stamped += 1
            await send_rtcp(packets)

        return send

    chain.wrap(sender, compat.SENDER_NEXT_ENCODED_FRAME, LAYER, make_next)
    chain.wrap(sender, compat.SEND_RTCP, LAYER, make_send)
    setattr(sender, _MARK, state)
    return state
