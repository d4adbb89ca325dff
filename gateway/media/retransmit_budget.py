"""How much a sender may retransmit. Pure: (sequence number, size, time) in, send or skip out.

Why: aiortc's `RTCRtpSender` retransmits every packet each NACK names, as often as it is named, without
limit. When a link's rate falls (measured: a browser viewer's downlink stepped from 1.5 Mbit/s to 400
kbit/s, `scripts/bench_browser_uplink.py --step-link down`), the receiver NACKs everything the queue
dropped, again every round trip, and the retransmissions (about 2 Mbit/s offered for a 400 kbit/s link in
that test) fill the queue that was already overflowing: 25-35 % of the packets were dropped in the two
seconds after the step, most of them retransmissions.

The same two limits as libwebrtc's sender (its retransmission rate limiter, and a packet's minimum time
between retransmissions):
- a token bucket at the encoder's current target bitrate over `window_s` (retransmissions cannot exceed what
  the link is believed to carry), and
- one packet is not sent again within `min_interval_s`, or the latest round trip if that is longer
  (the first retransmission is still on its way).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field


@dataclass
class RetransmitBudget:
    window_s: float = 1.0
    min_interval_s: float = 0.1
    history: int = 1024
    _tokens_bits: float = 0.0
    _refilled_at: float | None = None
    _last_sent: OrderedDict[int, float] = field(default_factory=OrderedDict)
    sent: int = 0
    skipped_budget: int = 0
    skipped_repeat: int = 0

    def allow(
        self, sequence: int, size_bytes: int, rate_bps: float, now: float, rtt_s: float | None = None
    ) -> bool:
        """Whether to retransmit packet `sequence` of `size_bytes` now, with the target at `rate_bps`."""
        capacity = max(rate_bps, 0.0) * self.window_s
        if self._refilled_at is None:
            self._tokens_bits = capacity
        else:
            self._tokens_bits = min(
                capacity, self._tokens_bits + (now - self._refilled_at) * max(rate_bps, 0.0)
            )
        self._refilled_at = now
        last = self._last_sent.get(sequence)
        if last is not None and now - last < max(self.min_interval_s, rtt_s or 0.0):
            self.skipped_repeat += 1
            return False
        bits = 8.0 * size_bytes
        if bits > self._tokens_bits:
            self.skipped_budget += 1
            return False
        self._tokens_bits -= bits
        self._last_sent.pop(sequence, None)
        self._last_sent[sequence] = now
        while len(self._last_sent) > self.history:
            self._last_sent.popitem(last=False)
        self.sent += 1
        return True

    def counters(self) -> dict[str, int]:
        return {
            "sent": self.sent,
            "skipped_budget": self.skipped_budget,
            "skipped_repeat": self.skipped_repeat,
        }
