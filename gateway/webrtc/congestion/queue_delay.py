"""The queueing delay on one receiver's path, from round trips or one-way transit. Pure.

A bottleneck queues before it drops; reading the queue lets the sender back off before loss. `QueueDelay`:
each receiver report's round trip above the lowest of the last `window_s` is the path's queue. A
publisher's receiver reports wait behind its own media on its uplink, so `OneWayDelay` measures that
reverse queue where the media arrives (each frame's first packet against its abs-send-time, unwrapped by
`AbsSendClock`, else its RTP timestamp) and the sender takes it out of the round trip. The base is a
window's minimum, so a changed route is re-learned within the window.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

RTT_SAMPLES = 256  # receiver reports come about once a second: over four minutes of them
TRANSIT_SAMPLES = 4096


@dataclass
class QueueDelay:
    window_s: float = 30.0
    last_rtt_s: float | None = None
    last_at: float = float("-inf")
    queue_s: float | None = None  # the latest sample's round trip above the base
    previous_queue_s: float | None = None
    # Bounded in count as well as in time: a peer that floods receiver reports (each one a sample, each
    # sample a scan of the window) costs at most this much per report.
    _samples: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=RTT_SAMPLES))

    def add(self, rtt_s: float, now: float) -> float:
        """One round-trip sample at `now`; returns its queueing delay (>= 0)."""
        self._samples.append((now, rtt_s))
        while len(self._samples) > 1 and now - self._samples[0][0] > self.window_s:
            self._samples.popleft()
        self.last_rtt_s = rtt_s
        self.last_at = now
        self.previous_queue_s = self.queue_s
        self.queue_s = rtt_s - self._base()
        return self.queue_s

    @property
    def base_s(self) -> float | None:
        return self._base() if self._samples else None

    def _base(self) -> float:
        return min(rtt for _, rtt in self._samples)

    def draining(self, by_s: float) -> bool:
        """The queue shrank by more than `by_s` since the previous sample (a cut is already taking hold)."""
        return self.queue_s is not None and _draining(self.queue_s, self.previous_queue_s, by_s)

    def quiet(self, low_s: float) -> bool:
        """The last two samples both queued less than `low_s` (the path has room at the current rate)."""
        if self.queue_s is None or self.previous_queue_s is None:
            return False
        return max(self.queue_s, self.previous_queue_s) < low_s

    def standing(self, now: float, span_s: float) -> float | None:
        """The lowest queue of the samples in the last `span_s` (what stood all along, not one burst's
        peak); None without a sample in it."""
        recent = [rtt for at, rtt in self._samples if now - at <= span_s]
        return min(recent) - self._base() if recent else None

    def filling(self, high_s: float, drain_s: float) -> bool:
        """See `standing_queue`."""
        if self.queue_s is None:
            return False
        return standing_queue(self.queue_s, self.previous_queue_s, high_s, drain_s)


def standing_queue(queue_s: float, previous_s: float | None, high_s: float, drain_s: float) -> bool:
    """A standing queue, not one frame's burst: the last two samples both queued more than `high_s`, or the
    latest more than twice that (more than any one frame queues), and the latest is not draining (shrunk by
    more than `drain_s` since the previous one: a cut is already taking hold)."""
    if _draining(queue_s, previous_s, drain_s):
        return False
    if queue_s > 2 * high_s:
        return True
    return previous_s is not None and min(queue_s, previous_s) > high_s


def _draining(queue_s: float, previous_s: float | None, by_s: float) -> bool:
    return previous_s is not None and queue_s < previous_s - by_s


@dataclass
class OneWayDelay:
    """The standing queue on a path media arrives over, from (media timestamp, arrival time) per frame."""

    window_s: float = 30.0
    recent_s: float = 0.5
    jump_s: float = 10.0  # a transit change larger than this is a new clock (RTP wrap, new stream): restart
    # (arrival, transit); bounded in count too (a flood of RTP timestamps), ~68 s of 60 fps video
    _samples: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=TRANSIT_SAMPLES))

    def add(self, media_s: float, arrival_s: float) -> None:
        transit = arrival_s - media_s
        if self._samples and abs(transit - self._samples[-1][1]) > self.jump_s:
            self._samples.clear()
        self._samples.append((arrival_s, transit))
        while len(self._samples) > 1 and arrival_s - self._samples[0][0] > self.window_s:
            self._samples.popleft()

    def standing(self, now: float) -> float:
        """The queue the path held over the last `recent_s` (0 without recent media: an idle path)."""
        recent = [transit for arrival, transit in self._samples if now - arrival <= self.recent_s]
        if not recent:
            return 0.0
        return max(0.0, min(recent) - min(transit for _, transit in self._samples))


@dataclass
class AbsSendClock:
    """Unwrap abs-send-time (RTP header extension, 24-bit 6.18 fixed-point seconds, wrapping every 64 s;
    webrtc.org's abs-send-time) into a growing number of seconds."""

    _last: float | None = None
    _cycles: int = 0

    def seconds(self, value: int) -> float:
        now = (value & 0xFFFFFF) / float(1 << 18)
        last = self._last
        if last is not None and now < last - 32.0:
            self._cycles += 1  # wrapped forward
        elif last is not None and now > last + 32.0:
            return now + 64.0 * (self._cycles - 1)  # a packet from before the last wrap, reordered
        self._last = now
        return now + 64.0 * self._cycles
