"""What one receiver's transport-cc feedback says about the path our packets take. Pure: stamped packets and
parsed feedback in, one sample per feedback packet out.

Each packet the gateway sends to a receiver that negotiated transport-cc carries a transport-wide sequence
number (gateway.webrtc.congestion.transport_cc stamps it); `SendHistory` remembers when each left and how big
it was. A
feedback packet (gateway.webrtc.congestion.transport_feedback) gives each one's arrival time on the receiver's
clock.
Arrival minus send time is the one-way transit plus a constant clock offset; above its minimum over a window
it is the queue our packets wait in, measured 10-20 times a second in our direction only (the round trips of
receiver reports, once a second, also carry the reverse path's queue).

Per feedback packet: the lowest transit of the packets it reports (a frame's first packet waits only for what
was queued before it, not behind its own frame: the standing queue, not one frame's burst), how many were
received and lost, and the rate acknowledged as received over the last `acked_window_s` of arrivals (GCC
decreases to a fraction of that, draft-ietf-rmcat-gcc-02 section 5.5).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

from gateway.webrtc.congestion.transport_feedback import TransportFeedback

HISTORY = 4096  # stamped packets remembered: several seconds at the highest rates a stream runs at


@dataclass(frozen=True)
class FeedbackSample:
    transit_s: float | None  # the lowest arrival - send time of the packets reported received (offset clock)
    received: int
    lost: int
    acked_bps: float | None  # received bytes per second over the recent arrivals


@dataclass
class SendHistory:
    acked_window_s: float = 0.5  # short: after a link's rate falls, what arrives shows it within this
    history: int = HISTORY
    _sent: OrderedDict[int, tuple[float, int]] = field(default_factory=OrderedDict)  # sequence -> (at, bytes)
    _acked: deque[tuple[float, int]] = field(default_factory=deque)  # (arrival, receiver clock; bytes)
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
            transits.append(arrival_s - sent_at)
            self._acked.append((arrival_s, size))
        acked_bps = None
        if self._acked:
            newest = max(at for at, _ in self._acked)
            while self._acked and newest - self._acked[0][0] > self.acked_window_s:
                self._acked.popleft()
            span = newest - min(at for at, _ in self._acked)
            if span >= self.acked_window_s / 2:
                acked_bps = sum(size for _, size in self._acked) * 8 / span
        return FeedbackSample(min(transits) if transits else None, received, lost, acked_bps)
