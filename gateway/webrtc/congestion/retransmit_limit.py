"""Apply `retransmit_budget` to one aiortc sender's NACK answers.

The sender's `_retransmit` is wrapped on this instance: a NACKed packet is looked up in the sender's history
only for its size, and resent when the budget allows; when the budget asks for a keyframe instead, the
callback is told. On an unchecked aiortc nothing is wrapped.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from aiortc import RTCRtpSender

from gateway.webrtc import chain, compat
from gateway.webrtc.congestion.retransmit_budget import RetransmitBudget, newest

RTP_HEADER_BYTES = 12
LAYER = "retransmission budget"


def limit_retransmissions(
    sender: RTCRtpSender,
    budget: RetransmitBudget,
    rate_bps: Callable[[], float],
    rtt_s: Callable[[], float | None] = lambda: None,
    request_keyframe: Callable[[], None] | None = None,
) -> bool:
    """Wrap `sender`'s retransmissions in `budget` at `rate_bps()`; False (nothing changed) on an aiortc
    whose sender lacks the expected internals. `request_keyframe`: called when the budget's refused packets
    are more than it can resend soon (`RetransmitBudget.wants_keyframe`)."""
    if compat.refused("the retransmission budget"):
        return False
    try:
        from aiortc.rtcrtpsender import RTP_HISTORY_SIZE
    except ImportError:
        return False
    history = compat.rtp_history(sender)
    if not hasattr(sender, compat.SENDER_RETRANSMIT) or not isinstance(history, dict):
        return False

    def make(original: Callable[[int], Awaitable[None]]) -> Callable[[int], Awaitable[None]]:
        async def retransmit(sequence_number: int) -> None:
            packet = history.get(sequence_number % RTP_HISTORY_SIZE)
            if packet is None or packet.sequence_number != sequence_number:
                return
            size = RTP_HEADER_BYTES + len(packet.payload)
            now, rate = time.monotonic(), rate_bps()
            if budget.allow(sequence_number, size, rate, now, rtt_s()):
                await original(sequence_number)
            elif request_keyframe is not None:

                def newest_sent() -> int:  # only when a keyframe is due: a scan of the history
                    return newest((p.sequence_number for p in history.values()), sequence_number)

                if budget.wants_keyframe(rate, now, newest_sent):
                    request_keyframe()

        return retransmit

    chain.wrap(sender, compat.SENDER_RETRANSMIT, LAYER, make)
    return True
