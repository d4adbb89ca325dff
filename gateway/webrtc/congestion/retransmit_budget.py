"""How much a sender may retransmit. Pure: (sequence number, size, time) in, send or skip out.

aiortc resends every packet each NACK names, as often as named: when a link's rate falls, the resends fill
the queue that was already overflowing. The limits are libwebrtc's: a token bucket at the encoder's target
bitrate over `window_s`, and one packet not again within `min_interval_s` or the latest round trip. When the
refused packets are more than the budget could resend soon, `wants_keyframe` says to repair with a keyframe
and give up what was sent before it. Measurements: docs/BENCHMARKS.md.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


@dataclass
class RetransmitBudget:
    window_s: float = 1.0
    min_interval_s: float = 0.1
    history: int = 1024
    catch_up_s: float = 0.5
    keyframe_gap_s: float = 1.0  # at most one repair keyframe per this long
    forget_after_s: float = 5.0  # refusals and give-ups older than this are forgotten (16-bit seqs)
    _tokens_bits: float = 0.0
    _refilled_at: float | None = None
    _last_sent: OrderedDict[int, float] = field(default_factory=OrderedDict)
    _refused: OrderedDict[int, tuple[float, float]] = field(default_factory=OrderedDict)  # seq -> bits, when
    _refused_bits: float = 0.0  # their sum
    _given_up_through: int | None = None  # the newest sequence number sent when a keyframe was asked for
    _given_up_at: float = float("-inf")
    _keyframe_at: float | None = None
    sent: int = 0
    skipped_budget: int = 0
    skipped_repeat: int = 0
    skipped_given_up: int = 0
    keyframes: int = 0

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
        self._forget_old(now)
        if self._given_up_through is not None and _at_or_before(sequence, self._given_up_through):
            self.skipped_given_up += 1
            return False
        last = self._last_sent.get(sequence)
        if last is not None and now - last < max(self.min_interval_s, rtt_s or 0.0):
            self.skipped_repeat += 1
            return False
        bits = 8.0 * size_bytes
        if bits > self._tokens_bits:
            self.skipped_budget += 1
            if sequence not in self._refused:
                self._refused[sequence] = (bits, now)
                self._refused_bits += bits
                while len(self._refused) > self.history:
                    self._refused_bits -= self._refused.popitem(last=False)[1][0]
            return False
        self._tokens_bits -= bits
        refused = self._refused.pop(sequence, None)
        if refused is not None:
            self._refused_bits -= refused[0]
        self._last_sent.pop(sequence, None)
        self._last_sent[sequence] = now
        while len(self._last_sent) > self.history:
            self._last_sent.popitem(last=False)
        self.sent += 1
        return True

    def wants_keyframe(self, rate_bps: float, now: float, newest_sent: Callable[[], int]) -> bool:
        """Whether the refused packets are more than the budget can resend within `catch_up_s` (at most once
        per `keyframe_gap_s`). True gives up every packet up to `newest_sent()` (the sender's newest sequence
        number, asked only then): the caller sends a keyframe instead, which decodes without them."""
        self._forget_old(now)
        if self._refused_bits <= max(rate_bps, 0.0) * self.catch_up_s:
            return False
        if self._keyframe_at is not None and now - self._keyframe_at < self.keyframe_gap_s:
            return False
        self._keyframe_at = now
        self.keyframes += 1
        self._given_up_through, self._given_up_at = newest_sent(), now
        self._refused.clear()
        self._refused_bits = 0.0
        return True

    def _forget_old(self, now: float) -> None:
        """Refusals older than `forget_after_s` (oldest first: insertion order is time order), and a give-up
        that old."""
        refused = self._refused
        while refused and next(iter(refused.values()))[1] < now - self.forget_after_s:
            self._refused_bits -= refused.popitem(last=False)[1][0]
        if now - self._given_up_at > self.forget_after_s:
            self._given_up_through = None

    def counters(self) -> dict[str, int]:
        return {
            "sent": self.sent,
            "skipped_budget": self.skipped_budget,
            "skipped_repeat": self.skipped_repeat,
            "skipped_given_up": self.skipped_given_up,
            "repair_keyframes": self.keyframes,
        }


def _at_or_before(sequence: int, reference: int) -> bool:
    """RTP sequence order with wrap-around: `sequence` is `reference` or up to half the range before it."""
    return (reference - sequence) % 65536 < 32768


def newest(sequences: Iterable[int], near: int) -> int:
    """The newest of `sequences` (all within half the 16-bit range of `near`)."""
    return max(sequences, key=lambda sequence: (sequence - near + 32768) % 65536, default=near)
