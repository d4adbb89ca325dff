"""Pacing a video sender's packets (gateway.media.pacer) where aiortc hands them to the transport.

aiortc's `RTCRtpSender` awaits `transport._send_rtp(packet)` for each packet of a frame in turn, and for
each retransmission. `install_pacer` wraps that method of the sender's (bundled) DTLS transport: a packet
of this sender's SSRCs (media and RTX) waits for its slot; anything else on the transport (audio, another
sender) passes at once. Install it after `gateway.rtc.transport_cc.install_send_side`, so a packet's
transport-cc send time is when it really left.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable

from aiortc import RTCRtpSender

from gateway.media.pacer import PacingBudget, PacingConfig

_MARK = "_livefuse_pacer"


def install_pacer(
    sender: RTCRtpSender, rate_bps: Callable[[], float], config: PacingConfig | None = None
) -> PacingBudget | None:
    """Pace `sender`'s packets at `config.factor` x `rate_bps()`. None where this aiortc has no
    `_send_rtp` or the transport is already paced (one video sender per connection here)."""
    transport = sender.transport
    send_rtp = getattr(transport, "_send_rtp", None)
    ssrcs = {getattr(sender, "_ssrc", None), getattr(sender, "_rtx_ssrc", None)} - {None}
    if send_rtp is None or not ssrcs or getattr(transport, _MARK, None) is not None:
        return None
    budget = PacingBudget(config or PacingConfig())
    ours = frozenset(int(s) for s in ssrcs if s is not None)

    async def send(data: bytes) -> None:
        if len(data) >= 12 and struct.unpack_from("!I", data, 8)[0] in ours:
            now = time.monotonic()
            at = budget.depart(now, len(data), rate_bps())
            if at - now > 0.0005:
                await asyncio.sleep(at - now)
        await send_rtp(data)

    transport._send_rtp = send  # type: ignore[method-assign]
    setattr(transport, _MARK, budget)
    return budget
