"""Make one aiortc sender's RTCP sender reports carry capture time instead of send time.

Why: `RTCRtpSender._run_rtcp` reports (NTP of when the last packet was SENT, its RTP timestamp). For our
processed video that NTP is later than the capture instant by the processing delay, and receivers that line
audio up with video through SRs would then play the sound early by that much (see
`gateway.webrtc.sync.clocks`).
`stamp_sender_reports` rewrites, in each outgoing SR of this one sender, the NTP time to the capture instant
of the media with that RTP timestamp, taken from `capture_of(timestamp)` (the session's `CaptureClock`).

How the RTP timestamp is mapped back to our own media timestamp: aiortc adds a random origin to every frame's
timestamp (a local of `_run_rtp`). The sender sends a frame's packets completely before it asks the track
for the next frame, so when `_next_encoded_frame` is entered again, the sender's last RTP timestamp belongs
to the frame returned last: their difference is the origin. Both wrappers are set on this instance only.

Version guard: `_RTCRtpSender__rtp_timestamp`, `_RTCRtpSender__lsr`, `_next_encoded_frame` and
`_send_rtcp` checked against aiortc 1.14-1.16; elsewhere nothing is changed (SRs stay send-time based) and
False is returned.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiortc import RTCRtpSender
from aiortc.rtp import RtcpSrPacket

from gateway.webrtc import compat
from gateway.webrtc.sync.clocks import Unwrapper

logger = logging.getLogger(__name__)

_MARK = "_livefuse_sr_stamp"


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
    next_frame: Callable[[Any], Awaitable[Any]] = getattr(sender, compat.SENDER_NEXT_ENCODED_FRAME)
    send_rtcp: Callable[[Any], Awaitable[None]] = getattr(sender, compat.SEND_RTCP)

    async def next_encoded_frame(codec: Any) -> Any:
        if state.origin is None and state.last_timestamp is not None:
            state.origin = (getattr(sender, compat.SENDER_RTP_TIMESTAMP) - state.last_timestamp) & 0xFFFFFFFF
        frame = await next_frame(codec)
        if frame is not None:
            state.last_timestamp = frame.timestamp
            unwrap.last_rel = max(unwrap.last_rel, frame.timestamp)
        return frame

    async def send(packets: Any) -> None:
        if state.origin is not None and isinstance(packets, list):
            for packet in packets:
                if isinstance(packet, RtcpSrPacket) and packet.ssrc == getattr(sender, compat.SENDER_SSRC):
                    media_ts = unwrap.near((packet.sender_info.rtp_timestamp - state.origin) & 0xFFFFFFFF)
                    ntp = capture_of(media_ts)
                    if ntp is None:
                        state.unstamped += 1
                        continue
                    packet.sender_info.ntp_timestamp = ntp
                    # keeps aiortc's RTT estimate
                    setattr(sender, compat.SENDER_LSR, (ntp >> 16) & 0xFFFFFFFF)
                    state.stamped += 1
        await send_rtcp(packets)

    setattr(sender, compat.SENDER_NEXT_ENCODED_FRAME, next_encoded_frame)
    setattr(sender, compat.SEND_RTCP, send)
    setattr(sender, _MARK, state)
    return state
