"""What one receiver's transport-cc feedback says about the path our packets take. Pure.

`SendHistory` remembers when each stamped packet left and how big it was; a feedback packet gives each one's
arrival on the receiver's clock. Arrival minus send time is the transit plus a clock offset; above its
minimum over a window it is the queue our packets wait in, in our direction only. Per feedback packet: the
lowest transit it reports (a frame's first packet: the standing queue, not one frame's burst), and the rate
the receiver acknowledged.
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
