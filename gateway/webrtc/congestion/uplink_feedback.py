"""Apply `uplink_rate` to one publisher's video receiver: count its packets, cap its REMBs.

The receiver's `MarkerJitterBuffer` hands every packet to a `SequenceCounter`; the receiver's `_send_rtcp`
is wrapped so any REMB leaving it carries min(estimate, cap). `UplinkFeedback.run` closes a window every
`window_s` and, while a cap is set, sends one REMB itself (aiortc's estimator may stay quiet for seconds).
On an unchecked aiortc, or a receiver without the marker buffer, nothing is installed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiortc import RTCRtpReceiver
from aiortc.rtp import RTCP_PSFB_APP, RtcpPsfbPacket, RtpPacket, pack_remb_fci, unpack_remb_fci

from gateway.webrtc import chain, compat
from gateway.webrtc.congestion.queue_delay import OneWayDelay
from gateway.webrtc.congestion.uplink_rate import SequenceCounter, UplinkRateConfig, UplinkRatePolicy
from gateway.webrtc.recovery.jitter_buffer import MarkerJitterBuffer

logger = logging.getLogger(__name__)

_MARK = "_livefuse_uplink_feedback"
LAYER = "uplink REMB cap"


class UplinkFeedback:
    """The uplink cap of one publisher's video receiver (see the module docstring)."""

    def __init__(
        self,
        receiver: RTCRtpReceiver,
        config: UplinkRateConfig,
        send: Callable[[Any], Awaitable[None]],
        transit: OneWayDelay | None = None,
    ) -> None:
        self.config = config
        self.transit = transit  # the uplink's queue (recovery.jitter_buffer.measure_transit feeds it)
        self.policy = UplinkRatePolicy(config)
        self._receiver = receiver
        self._send = send  # aiortc's own _send_rtcp (unwrapped)
        self._counters: dict[int, SequenceCounter] = {}
        self.delay_based_bps: int | None = None  # aiortc's latest estimate, before the cap
        self.rembs_capped = 0
        self.rembs_sent = 0
        self.last_window: dict[str, float | None] | None = None

    def on_packet(self, packet: RtpPacket) -> None:
        counter = self._counters.get(packet.ssrc)
        if counter is None:
            counter = self._counters[packet.ssrc] = SequenceCounter()
        counter.add(packet.sequence_number, len(packet.payload))

    async def send_rtcp(self, packet: Any) -> None:
        """The receiver's `_send_rtcp`: a REMB goes out capped, anything else unchanged."""
        if isinstance(packet, RtcpPsfbPacket) and packet.fmt == RTCP_PSFB_APP:
            try:
                bitrate, ssrcs = unpack_remb_fci(packet.fci)
            except ValueError:
                bitrate, ssrcs = -1, []
            if bitrate >= 0:
                self.delay_based_bps = bitrate
                capped = self.policy.capped(bitrate)
                if capped < bitrate:
                    self.rembs_capped += 1
                    packet = RtcpPsfbPacket(
                        fmt=RTCP_PSFB_APP,
                        ssrc=packet.ssrc,
                        media_ssrc=packet.media_ssrc,
                        fci=pack_remb_fci(capped, ssrcs),
                    )
        await self._send(packet)

    def close_window(self, seconds: float) -> float | None:
        """Fold the packets since the last call into the policy (the busiest stream decides: RTX and FEC
        streams are small); the cap now in force."""
        windows = [c.take(seconds) for c in self._counters.values()]
        if not windows:
            return self.policy.cap_bps
        window = max(windows, key=lambda w: w.expected)
        queue = self.transit.standing(time.monotonic()) if self.transit is not None else None
        cap = self.policy.on_window(window, queue)
        self.last_window = {
            "expected": window.expected,
            "received": window.received,
            "late": window.late,
            "loss": round(window.loss, 4),
            "received_kbps": round(window.received_bps / 1000, 1),
            "queue_ms": round(queue * 1000, 1) if queue is not None else None,
        }
        return cap

    async def announce(self) -> None:
        """While a cap is set, tell the publisher (one REMB for every stream seen)."""
        rtcp_ssrc = compat.rtcp_ssrc(self._receiver)
        cap = self.policy.cap_bps
        if cap is None or rtcp_ssrc is None or not self._counters:
            return
        bitrate = self.policy.capped(self.delay_based_bps if self.delay_based_bps is not None else cap)
        packet = RtcpPsfbPacket(
            fmt=RTCP_PSFB_APP,
            ssrc=rtcp_ssrc,
            media_ssrc=0,
            fci=pack_remb_fci(bitrate, sorted(self._counters)),
        )
        await self._send(packet)
        self.rembs_sent += 1

    async def run(self) -> None:
        """Close a window every `window_s` until cancelled."""
        last = time.monotonic()
        while True:
            await asyncio.sleep(self.config.window_s)
            now = time.monotonic()
            before = self.policy.cap_bps
            cap = self.close_window(now - last)
            last = now
            if cap is not None and (before is None or cap < before):
                logger.info(
                    "uplink: loss %.0f %% on the publisher's stream; asking for at most %d kbit/s",
                    100 * (self.policy.last_loss or 0.0),
                    cap // 1000,
                )
            try:
                await self.announce()
            except ConnectionError:  # transport gone: the session is closing
                return

    def stats(self) -> dict[str, Any]:
        cap, delay_based = self.policy.cap_bps, self.delay_based_bps
        return {
            "cap_kbps": round(cap / 1000) if cap is not None else None,
            "delay_based_kbps": round(delay_based / 1000) if delay_based is not None else None,
            "decreases": self.policy.decreases,
            "delay_decreases": self.policy.delay_decreases,
            "rembs_capped": self.rembs_capped,
            "rembs_sent": self.rembs_sent,
            "last_window": self.last_window,
        }


def install(
    receiver: RTCRtpReceiver, config: UplinkRateConfig, transit: OneWayDelay | None = None
) -> UplinkFeedback | None:
    """Count `receiver`'s packets and cap its REMBs (by loss, and by `transit`'s queue when given); None
    (nothing changed) where that cannot be done."""
    if not config.enabled or compat.refused("the uplink rate cap"):
        return None
    existing = getattr(receiver, _MARK, None)
    if isinstance(existing, UplinkFeedback):
        return existing
    buffer = compat.jitter_buffer(receiver)
    send = compat.send_rtcp(receiver) if hasattr(receiver, compat.SEND_RTCP) else None
    if not isinstance(buffer, MarkerJitterBuffer) or send is None:
        return None
    feedback = UplinkFeedback(receiver, config, send, transit)
    buffer.packet_observer = feedback.on_packet

    def make(_send: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
        async def send_rtcp(packet: Any) -> None:
            await feedback.send_rtcp(packet)

        return send_rtcp

    chain.wrap(receiver, compat.SEND_RTCP, LAYER, make)
    setattr(receiver, _MARK, feedback)
    return feedback
