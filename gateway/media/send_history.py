"""What one receiver's transport-cc feedback says about the path our packets take. Pure: stamped packets and
parsed feedback in, one sample per feedback packet out.

Each packet the gateway sends to a receiver that negotiated transport-cc carries a transport-wide sequence
number (gateway.rtc.transport_cc stamps it); `SendHistory` remembers when each left and how big it was. A
feedback packet (gateway.media.transport_feedback) gives each one's arrival time on the receiver's clock.
Arrival minus send time is the one-way transit plus a constant clock offset; above its minimum over a window
it is the queue our packets wait in, measured 10-20 times a second in our direction only (the round trips of
receiver reports, once a second, also carry the reverse path's queue).

Per feedback packet: the lowest transit of the packets it reports (a frame's first packet waits only for what
was queued before it, not behind its own frame: the standing queue, not one frame's burst), how many were
received and lost, and the rate acknowledged as received over the last `acked_window_s` of arrivals (GCC
decreases to a fraction of that, draft-ietf-rmcat-gcc-02 section 5.5).

And the rate the bottleneck delivered while it was busy (`busy_bps`): a packet that arrives `queued_s` later
than the path's base transit waited behind others, so from one such packet to the next the link did nothing
but deliver. The bytes of the newest run of queued packets over the time they took to arrive are the link's
rate, whatever the sender did around them. The acknowledged rate over half a second is not: at 15 fps it
holds some seven frames, and a run of small ones read 343 kbit/s on a 600 kbit/s link while 432 kbit/s was
sent (the cut that followed went to 0.85x of it).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

from gateway.media.transport_feedback import TransportFeedback

HISTORY = 4096  # stamped packets remembered: several seconds at the highest rates a stream runs at


@dataclass(frozen=True)
class FeedbackSample:
    transit_s: float | None  # the lowest arrival - send time of the packets reported received (offset clock)
    received: int
    lost: int
    acked_bps: float | None  # received bytes per second over the recent arrivals
    busy_bps: float | None = None  # bytes per second delivered while the bottleneck was busy (see above)


@dataclass
class SendHistory:
    acked_window_s: float = 0.5  # short: after a link's rate falls, what arrives shows it within this
    history: int = HISTORY
    queued_s: float = 0.005  # a packet this far above the base transit waited behind others
    base_window_s: float = 10.0  # the base transit is the lowest over this long
    busy_min_packets: int = 4  # a busy run shorter than this (or than busy_min_s) says nothing
    busy_min_s: float = 0.010
    _sent: OrderedDict[int, tuple[float, int]] = field(default_factory=OrderedDict)  # sequence -> (at, bytes)
    # (arrival on the receiver's clock, bytes, transit) of the recent arrivals
    _acked: deque[tuple[float, int, float]] = field(default_factory=deque)
    _base: deque[tuple[float, float]] = field(default_factory=deque)  # (arrival, transit), rising transits
    feedback_packets: int = 0

    def sent(self, sequence: int, at_s: float, size: int) -> None:
        """A packet stamped with `sequence` (16 bits) left at `at_s` (monotonic) carrying `size` bytes."""
        sequence &= 0xFFFF
        self._sent.pop(sequence, None)
        self._sent[sequence] = (at_s, size)
        while len(self._sent) > self.history:
            self._sent.popitem(last=False)

    def on_feedback(self, feedback: TransportFeedback) -> FeedbackSample:
        self.feedback_packets += 1
        transits: list[float] = []
        received = lost = 0
        for sequence, arrival_us in feedback.arrivals:
            entry = self._sent.get(sequence)
            if entry is None:
                continue  # not ours, or too old to remember
            if arrival_us is None:
                lost += 1
                continue
            received += 1
            sent_at, size = entry
            arrival_s = arrival_us / 1e6
            transit = arrival_s - sent_at
            transits.append(transit)
            self._acked.append((arrival_s, size, transit))
            self._add_base(arrival_s, transit)
        acked_bps = busy_bps = None
        if self._acked:
            newest = max(at for at, _, _ in self._acked)
            while self._acked and newest - self._acked[0][0] > self.acked_window_s:
                self._acked.popleft()
            span = newest - min(at for at, _, _ in self._acked)
            if span >= self.acked_window_s / 2:
                acked_bps = sum(size for _, size, _ in self._acked) * 8 / span
            busy_bps = self._busy_bps()
        return FeedbackSample(min(transits) if transits else None, received, lost, acked_bps, busy_bps)

    def _add_base(self, arrival_s: float, transit: float) -> None:
        """The running minimum of transit over `base_window_s` (a monotonic deque)."""
        while self._base and self._base[-1][1] >= transit:
            self._base.pop()
        self._base.append((arrival_s, transit))
        while arrival_s - self._base[0][0] > self.base_window_s:
            self._base.popleft()

    def _busy_bps(self) -> float | None:
        """The delivery rate of the newest run of queued packets in the window (None: no such run)."""
        if not self._base:
            return None
        floor = self._base[0][1] + self.queued_s
        run: list[tuple[float, int]] = []
        for arrival_s, size, transit in sorted(self._acked, reverse=True):
            if transit < floor:
                break
            run.append((arrival_s, size))
        if len(run) < self.busy_min_packets:
            return None
        span = run[0][0] - run[-1][0]
        if span < self.busy_min_s:
            return None
        return sum(size for _, size in run[:-1]) * 8 / span  # the oldest one's bytes came before the span
