"""What the gateway lets a publisher send: a cap on the REMB it returns. Pure policy.

aiortc's REMB is delay-based only, and a small drop-tail queue loses packets before delay shows, so a
sender that obeys REMB alone keeps overflowing its uplink. Per window of arrived sequence numbers: above
`loss_high` the cap drops as GCC's loss rule says (from what the publisher sent), below `loss_low` it grows;
a standing queue on the uplink (`queue_delay.OneWayDelay`) above `delay_high_s` cuts it to `delay_decrease`
of what arrived and above `delay_low_s` holds it. Only in-order first transmissions count as received, so
the loss is the congestion signal, not what NACKs repaired. Measurements: docs/BENCHMARKS.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.webrtc.congestion.queue_delay import standing_queue


@dataclass(frozen=True)
class UplinkRateConfig:
    enabled: bool = True
    window_s: float = 1.0
    min_packets: int = 20
    loss_high: float = 0.10
    loss_low: float = 0.02
    increase_per_s: float = 0.08
    min_bps: int = 150_000
    max_bps: int = 2_500_000  # a cap grown past this is dropped: the delay-based estimate rules alone
    delay_high_s: float = 0.08  # the uplink's standing queue that means it is filling
    delay_low_s: float = 0.03  # above it the cap does not grow
    drain_s: float = 0.02
    delay_decrease: float = 0.85

    def __post_init__(self) -> None:
        if self.window_s <= 0 or self.min_packets < 1:
            raise ValueError("window_s must be > 0 and min_packets >= 1")
        if not 0 <= self.loss_low < self.loss_high <= 1:
            raise ValueError("need 0 <= loss_low < loss_high <= 1")
        if not 0 < self.min_bps < self.max_bps:
            raise ValueError("need 0 < min_bps < max_bps")
        if self.increase_per_s < 0:
            raise ValueError("increase_per_s must be >= 0")
        if not 0 <= self.delay_low_s < self.delay_high_s or not 0 < self.delay_decrease < 1:
            raise ValueError("need 0 <= delay_low_s < delay_high_s and 0 < delay_decrease < 1")


@dataclass(frozen=True)
class UplinkWindow:
    """What arrived of one publisher stream over `seconds`."""

    expected: int  # sequence numbers the window spanned
    received: int  # packets that arrived in order (first transmissions)
    payload_bytes: int  # of every packet that arrived, retransmissions included (what the link carried)
    seconds: float
    late: int = 0  # packets behind the highest sequence number: retransmissions, reordering, duplicates

    @property
    def loss(self) -> float:
        if self.expected <= 0:
            return 0.0
        return min(1.0, max(0.0, 1.0 - self.received / self.expected))

    @property
    def received_bps(self) -> float:
        return self.payload_bytes * 8.0 / self.seconds if self.seconds > 0 else 0.0


class SequenceCounter:
    """Expected vs received RTP packets of one SSRC between `take` calls (RFC 3550 A.3's extended sequence
    numbers: wrap-around and reordering across the wrap are handled; a jump of more than 3000 restarts)."""

    MAX_JUMP = 3000

    def __init__(self) -> None:
        self._cycles = 0
        self._max_seq: int | None = None
        self._window_start: int | None = None  # extended seq the current window counts from
        self._received = 0
        self._late = 0
        self._bytes = 0

    def _extended_max(self) -> int:
        assert self._max_seq is not None
        return self._cycles + self._max_seq

    def add(self, seq: int, payload_bytes: int) -> None:
        seq &= 0xFFFF
        self._bytes += payload_bytes
        if self._max_seq is None:
            self._max_seq = seq
            self._window_start = seq
            self._received += 1
            return
        delta = (seq - self._max_seq) & 0xFFFF
        if delta == 0 or delta >= 0x8000:
            self._late += 1  # duplicate, retransmitted or reordered: not a first transmission in order
            return
        if delta > self.MAX_JUMP:  # the sender restarted its numbering: begin again from here
            self._cycles, self._max_seq = 0, seq
            self._window_start = seq
            self._received, self._late, self._bytes = 1, 0, payload_bytes
            return
        if seq < self._max_seq:
            self._cycles += 0x10000
        self._max_seq = seq
        self._received += 1

    def take(self, seconds: float) -> UplinkWindow:
        """The window since the last call; the next one starts after the highest sequence number seen."""
        if self._max_seq is None or self._window_start is None:
            window = UplinkWindow(0, self._received, self._bytes, seconds, self._late)
        else:
            end = self._extended_max()
            expected = end - self._window_start + 1
            window = UplinkWindow(expected, self._received, self._bytes, seconds, self._late)
            self._window_start = end + 1
        self._received = self._late = self._bytes = 0
        return window


@dataclass
class UplinkRatePolicy:
    config: UplinkRateConfig
    cap_bps: float | None = None
    last_loss: float | None = None
    last_queue_s: float | None = None
    decreases: int = 0
    delay_decreases: int = 0

    def on_window(self, window: UplinkWindow, queue_s: float | None = None) -> float | None:
        """Fold one window in (`queue_s`: the uplink's standing queue now, None if unmeasured); the cap now
        in force (None: no cap)."""
        cfg = self.config
        if window.expected < cfg.min_packets or window.seconds <= 0:
            return self.cap_bps
        loss = window.loss
        self.last_loss = loss
        previous_queue, self.last_queue_s = self.last_queue_s, queue_s
        if loss > cfg.loss_high:
            sent = window.received_bps / max(1.0 - loss, 0.05)  # received_bps includes the retransmissions
            base = sent if self.cap_bps is None else min(self.cap_bps, sent)
            self.cap_bps = max(float(cfg.min_bps), base * (1.0 - 0.5 * loss))
            self.decreases += 1
        elif queue_s is not None and standing_queue(queue_s, previous_queue, cfg.delay_high_s, cfg.drain_s):
            base = window.received_bps if self.cap_bps is None else min(self.cap_bps, window.received_bps)
            self.cap_bps = max(float(cfg.min_bps), base * cfg.delay_decrease)
            self.delay_decreases += 1
        elif queue_s is not None and queue_s > cfg.delay_low_s:
            pass  # a queue is building or draining: hold
        elif loss < cfg.loss_low and self.cap_bps is not None:
            self.cap_bps *= (1.0 + cfg.increase_per_s) ** window.seconds
            if self.cap_bps >= cfg.max_bps:
                self.cap_bps = None
        return self.cap_bps

    def capped(self, remb_bps: float) -> int:
        """A REMB value on its way to the publisher, lowered to the cap."""
        return int(remb_bps if self.cap_bps is None else min(remb_bps, self.cap_bps))
