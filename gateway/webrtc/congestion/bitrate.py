"""The processed stream's encoder bitrate, following what its receivers can take. Pure policy.

One encoder feeds the publisher's return path and every WHEP viewer, so its target is the minimum of the
receivers' estimates, clamped to [min_bps, max_bps]; `min_bps` bounds what one hopeless receiver can do to
the rest. Each receiver's estimate is the lowest of its REMB (counted only when under what was sent and loss
confirms it), GCC's loss rule on its receiver reports, and a delay rule on the queue its round trips or
transport-cc feedback show (`queue_delay`, `send_history`). Decreases apply at once; increases are held,
stepped, and slowed near where the receiver's link last choked. The ceiling follows the picture's size
(`size_class_bitrate`, libwebrtc's classes) unless fixed. The reasons and measurements: docs/BENCHMARKS.md.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field, replace

from gateway.webrtc.congestion.queue_delay import TRANSIT_SAMPLES, QueueDelay

# libwebrtc's default ceiling per picture size (GetMaxDefaultVideoBitrateKbps): what a browser sends its own
# camera at, so the processed stream is not re-encoded below what the publisher sent. Except the smallest
# class: libwebrtc's 600 kbit/s is raised to 1 Mbit/s, as a re-encode already loses a generation of quality.
SIZE_CLASS_BPS: tuple[tuple[int, int], ...] = (
    (320 * 240, 1_000_000),
    (640 * 480, 1_700_000),
    (960 * 540, 2_000_000),
)
LARGEST_CLASS_BPS = 2_500_000


def size_class_bitrate(width: int, height: int) -> int:
    """The default ceiling for a width x height stream (bits per second)."""
    pixels = max(0, width) * max(0, height)
    return next((bps for limit, bps in SIZE_CLASS_BPS if pixels <= limit), LARGEST_CLASS_BPS)


@dataclass(frozen=True)
class BitrateConfig:
    max_bps: int = 1_000_000  # the configured bitrate
    min_bps: int = 100_000
    start_fraction: float = 0.5  # start at half of max: a keyframe at max can overflow a slow link at once
    # ...and never above this, whatever the ceiling: a 720p stream's 2.5 Mbit/s ceiling is no reason to start
    # a link nobody has measured yet higher than a 320x240 one (libwebrtc starts every stream at 300 kbit/s)
    start_cap_bps: int = 500_000
    stale_after_s: float = 5.0
    loss_high: float = 0.10
    loss_low: float = 0.02
    min_change: float = 0.15
    increase_hold_s: float = 2.0
    max_step_up: float = 1.25  # an increase moves at most this factor: a link is only known up to its rate
    remb_margin: float = 0.85
    delay_high_s: float = 0.08  # queueing delay that means the bottleneck is filling
    delay_low_s: float = 0.03  # below it (and no loss) the delay-based rate may grow
    drain_s: float = 0.02  # a queue shrinking by more than this per report is already draining
    delay_decrease: float = 0.85
    delay_increase: float = 1.08
    base_window_s: float = 30.0
    rtt_grace_s: float = 5.0  # how long a reporting receiver without a round trip yet holds increases back
    # transport-cc receivers (one-way transit every 50-100 ms): after a delay-based cut, the next one waits
    # this long AND for the queue to stand higher than at the cut (still growing: the cut was not enough),
    # so cuts do not compound while the queue drains; a transit jump beyond `transit_jump_s` is a new
    # clock at the receiver (its reference time wrapped or restarted), not a queue
    transit_cut_hold_s: float = 0.3
    # ...and only within this long of it: a queue standing after that is new congestion, whatever its height
    # (with the bar kept longer, a queue standing just below the one of the earlier cut was left uncut
    # until the bottleneck dropped packets)
    transit_episode_s: float = 2.0
    transit_jump_s: float = 10.0
    transit_quiet_span_s: float = 0.5
    # the loss rule decreases at most once per this long plus the round trip (libwebrtc's 300 ms + RTT):
    # browsers send a receiver report with every NACK, so a burst of loss arrives as many reports, each
    # about packets sent before the previous cut could act (without the hold, cuts compound to the floor)
    loss_decrease_interval_s: float = 0.3
    # where a receiver's link last choked (what arrived at its latest cut): increases that would pass
    # `near_fraction` of it move by at most `near_step_up` (GCC's additive increase near the link's
    # capacity), so the same link is not overflowed by a full step again; carrying `near_reset` times it
    # without a cut means the link grew, and the estimate is dropped
    near_fraction: float = 0.85
    near_step_up: float = 1.08
    near_reset: float = 1.15

    def __post_init__(self) -> None:
        if not 0 < self.min_bps <= self.max_bps:
            raise ValueError("need 0 < min_bps <= max_bps")
        if not 0 < self.start_fraction <= 1:
            raise ValueError("start_fraction must be in (0, 1]")
        if self.start_cap_bps < self.min_bps:
            raise ValueError("start_cap_bps must be at least min_bps")
        if not 0 <= self.loss_low < self.loss_high <= 1:
            raise ValueError("need 0 <= loss_low < loss_high <= 1")
        if self.min_change <= 0 or self.stale_after_s <= 0 or self.increase_hold_s < 0:
            raise ValueError("min_change and stale_after_s must be > 0, increase_hold_s >= 0")
        if not 0 <= self.delay_low_s < self.delay_high_s or self.base_window_s <= 0:
            raise ValueError("need 0 <= delay_low_s < delay_high_s and base_window_s > 0")
        if self.max_step_up < 1 + self.min_change:
            raise ValueError("max_step_up must be at least 1 + min_change")
        if not 0 < self.delay_decrease < 1 <= self.delay_increase:
            raise ValueError("need 0 < delay_decrease < 1 <= delay_increase")
        if not (
            0 < self.near_fraction <= 1 and 1 < self.near_step_up <= self.max_step_up and self.near_reset > 1
        ):
            raise ValueError("need 0 < near_fraction <= 1 < near_step_up <= max_step_up and near_reset > 1")


@dataclass
class _Receiver:
    loss_based_bps: float
    delay_based_bps: float
    queue: QueueDelay
    reverse_queue_s: float | None = None
    remb_bps: float | None = None
    remb_at: float = float("-inf")
    last_loss: float | None = None
    first_report_at: float | None = None  # its first feedback of any kind
    transit: QueueDelay | None = None  # one-way queue from its transport-cc feedback, when it sends any
    transit_cut_at: float = float("-inf")
    transit_cut_queue_s: float = 0.0  # the queue when it was last cut
    loss_cut_at: float = float("-inf")
    loss_report_at: float | None = None
    transit_samples: int = 0
    capacity_bps: float | None = None  # what arrived at its latest cuts (BitrateConfig.near_fraction)
    cut_at: float = float("-inf")  # its latest cut of either kind

    def delay_queue(self, now: float, stale_after_s: float) -> QueueDelay:
        """The queue signal that rules this receiver: its transport-cc transit while that is fresh, else the
        round trips of its receiver reports."""
        transit = self.transit
        if transit is not None and now - transit.last_at <= stale_after_s:
            return transit
        return self.queue


@dataclass
class BitratePolicy:
    config: BitrateConfig = field(default_factory=BitrateConfig)
    current_bps: int = 0  # 0: start at max_bps
    changes: int = 0
    _receivers: dict[Hashable, _Receiver] = field(default_factory=dict)
    _last_change: float = float("-inf")
    _sent: deque[tuple[float, int]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        if not self.current_bps:
            self.current_bps = self.config.max_bps  # no receiver yet: nothing to be careful for

    def _start_rate(self) -> int:
        start = min(int(self.config.max_bps * self.config.start_fraction), self.config.start_cap_bps)
        return max(self.config.min_bps, start)

    def _receiver(self, key: Hashable, now: float | None = None) -> _Receiver:
        receiver = self._receivers.get(key)
        if receiver is None:
            top = float(self.config.max_bps)
            queue = QueueDelay(window_s=self.config.base_window_s)
            receiver = self._receivers[key] = _Receiver(loss_based_bps=top, delay_based_bps=top, queue=queue)
        if receiver.first_report_at is None and now is not None:
            receiver.first_report_at = now
        return receiver

    def add(self, key: Hashable) -> None:
        """A receiver joined. The first one of an encoder that never changed rate starts it at the start
        rate (its link is unknown until it reports)."""
        if not self._receivers and self.changes == 0:
            self.current_bps = min(self.current_bps, self._start_rate())
        self._receiver(key)

    def remove(self, key: Hashable) -> None:
        self._receivers.pop(key, None)

    @property
    def capacity_bps(self) -> int | None:
        """The lowest link capacity estimate among the receivers (None: no receiver's link choked yet)."""
        known = [r.capacity_bps for r in self._receivers.values() if r.capacity_bps is not None]
        return int(min(known)) if known else None

    def set_max(self, max_bps: int) -> None:
        """A new ceiling (the stream's size class changed). Receivers' estimates that sat at the old ceiling
        (nothing limited them) move to the new one; lower ones are what their links showed and stay. Before
        its first change the rate restarts at the new ceiling's start rate (`start_fraction` of it, at most
        `start_cap_bps`); after, it is only clamped (an increase then ramps as any other)."""
        old = self.config.max_bps
        max_bps = max(int(max_bps), self.config.min_bps)
        if max_bps == old:
            return
        self.config = replace(self.config, max_bps=max_bps)
        for receiver in self._receivers.values():
            if receiver.loss_based_bps >= old:
                receiver.loss_based_bps = float(max_bps)
            if receiver.delay_based_bps >= old:
                receiver.delay_based_bps = float(max_bps)
        if self.changes == 0:
            self.current_bps = self._start_rate() if self._receivers else max_bps
        else:
            self.current_bps = min(self.current_bps, max_bps)

    def on_remb(self, key: Hashable, bps: float, now: float) -> None:
        receiver = self._receiver(key, now)
        receiver.remb_bps = float(bps)
        receiver.remb_at = now

    def on_loss(self, key: Hashable, fraction_lost: float, now: float) -> None:
        """One receiver report: `fraction_lost` in 0..1 since that receiver's previous report."""
        receiver = self._receiver(key, now)
        receiver.last_loss = fraction_lost
        elapsed = (
            1.0 if receiver.loss_report_at is None else min(max(now - receiver.loss_report_at, 0.0), 1.0)
        )
        receiver.loss_report_at = now
        if fraction_lost > self.config.loss_high:
            interval = self.config.loss_decrease_interval_s + (receiver.queue.last_rtt_s or 0.0)
            if now - receiver.loss_cut_at >= interval:
                receiver.loss_based_bps = min(
                    receiver.loss_based_bps, self.current_bps * (1 - 0.5 * fraction_lost)
                )
                receiver.loss_cut_at = now
                self._arrived_at_cut(
                    receiver, (self.sent_bps(now) or self.current_bps) * (1 - fraction_lost), now
                )
        elif fraction_lost < self.config.loss_low:  # +5 % a second, however often reports come
            receiver.loss_based_bps = min(receiver.loss_based_bps * 1.05**elapsed, float(self.config.max_bps))

    def on_rtt(self, key: Hashable, rtt_s: float, now: float, reverse_queue_s: float = 0.0) -> None:
        """One round trip measured from a receiver report (LSR/DLSR) of this receiver. `reverse_queue_s`: what
        the report itself queued on its way back (`queue_delay.OneWayDelay`: a publisher's own uplink); the
        rest is our direction's. A sample the correction takes below zero is an artefact and is skipped."""
        receiver = self._receiver(key, now)
        config = self.config
        receiver.reverse_queue_s = reverse_queue_s
        if rtt_s - reverse_queue_s < 0:
            return
        queue_s = receiver.queue.add(rtt_s - reverse_queue_s, now)
        if receiver.delay_queue(now, config.stale_after_s) is not receiver.queue:
            return  # its transport-cc feedback measures the same queue, 10-20 times as often
        if receiver.queue.filling(config.delay_high_s, config.drain_s):
            self._delay_cut(receiver, self.sent_bps(now), now)
        elif queue_s < config.delay_low_s and (receiver.last_loss or 0.0) < config.loss_low:
            self._delay_grow(receiver, config.delay_increase)

    def _arrived_at_cut(self, receiver: _Receiver, arrived_bps: float, now: float) -> None:
        """The receiver's capacity estimate from a cut: the highest arrival rate seen at the cuts of one
        episode (cuts within `transit_episode_s` of each other: a fall takes several, and the later ones
        see a link that is dropping what the queue cannot hold), else this cut's."""
        previous = receiver.capacity_bps
        if previous is not None and now - receiver.cut_at <= self.config.transit_episode_s:
            arrived_bps = max(arrived_bps, previous)
        receiver.capacity_bps = arrived_bps
        receiver.cut_at = now

    def _delay_cut(self, receiver: _Receiver, arrived_bps: float | None, now: float) -> None:
        """The delay rule's decrease: `delay_decrease` x what arrived (or was sent), and never above that
        fraction of the current target, so the cut always clears `min_change` (an overshooting encoder's
        arrivals would otherwise make it a cut the hysteresis swallows while the queue grows on)."""
        current = float(self.current_bps)
        if arrived_bps:
            self._arrived_at_cut(receiver, arrived_bps, now)
        arrived = min(arrived_bps or current, current)
        receiver.delay_based_bps = max(
            float(self.config.min_bps), min(receiver.delay_based_bps, arrived * self.config.delay_decrease)
        )

    def _delay_grow(self, receiver: _Receiver, factor: float) -> None:
        receiver.delay_based_bps = min(receiver.delay_based_bps * factor, float(self.config.max_bps))

    def on_transit(self, key: Hashable, transit_s: float, acked_bps: float | None, now: float) -> None:
        """One transport-cc feedback packet of this receiver (`gateway.webrtc.congestion.send_history`): the
        lowest
        one-way transit of the packets it reports (arrival on its clock minus our send time) and the rate it
        acknowledged. The same delay rule as `on_rtt`, on a one-way queue measured 10-20 times a second:
        a standing queue cuts the delay-based rate to `delay_decrease` x what arrived, and again every
        `transit_cut_hold_s` while the queue keeps growing past where it stood at the last cut (a link that
        fell from 1.5 Mbit/s to 400 kbit/s needs several such cuts; one that is draining needs none); a
        short queue and no loss let it grow by `delay_increase` per second."""
        receiver = self._receiver(key, now)
        config = self.config
        transit = receiver.transit
        if transit is None or (
            transit.last_rtt_s is not None and abs(transit_s - transit.last_rtt_s) > config.transit_jump_s
        ):
            transit = receiver.transit = QueueDelay(
                window_s=config.base_window_s, _samples=deque(maxlen=TRANSIT_SAMPLES)
            )
        elapsed = min(max(now - transit.last_at, 0.0), 1.0)
        queue_s = transit.add(transit_s, now)
        receiver.transit_samples += 1
        if transit.filling(config.delay_high_s, config.drain_s):
            held = now - receiver.transit_cut_at < config.transit_cut_hold_s
            growing = (
                now - receiver.transit_cut_at > config.transit_episode_s
                or queue_s > receiver.transit_cut_queue_s
            )
            if not held and growing:
                self._delay_cut(receiver, acked_bps or self.sent_bps(now), now)
                receiver.transit_cut_at = now
                receiver.transit_cut_queue_s = queue_s
        elif queue_s < config.delay_low_s and (receiver.last_loss or 0.0) < config.loss_low:
            self._delay_grow(receiver, config.delay_increase**elapsed)

    def rtt_s(self, key: Hashable) -> float | None:
        """This receiver's latest round trip (receiver reports), if any."""
        receiver = self._receivers.get(key)
        return receiver.queue.last_rtt_s if receiver is not None else None

    def on_sent(self, nbytes: int, now: float) -> None:
        """Bytes of one encoded frame handed to the senders."""
        self._sent.append((now, nbytes))
        while self._sent and now - self._sent[0][0] > 1.0:
            self._sent.popleft()

    def sent_bps(self, now: float) -> float:
        recent = [n for t, n in self._sent if now - t <= 1.0]
        return sum(recent) * 8.0

    def estimate(self, now: float) -> int:
        """What the receivers can take now (before hysteresis): the minimum of their estimates, clamped."""
        estimates = []
        sent = self.sent_bps(now)
        for receiver in self._receivers.values():
            value = min(receiver.loss_based_bps, receiver.delay_based_bps)
            remb = receiver.remb_bps
            fresh = remb is not None and now - receiver.remb_at <= self.config.stale_after_s
            lossy = receiver.last_loss is not None and receiver.last_loss >= self.config.loss_low
            if fresh and lossy and remb is not None and remb < sent * self.config.remb_margin:
                value = min(value, remb)
            estimates.append(value)
        wanted = min(estimates) if estimates else float(self.config.max_bps)
        return int(max(self.config.min_bps, min(self.config.max_bps, wanted)))

    def update(self, now: float) -> int | None:
        """The new encoder bitrate if it should change now, else None."""
        wanted = self.estimate(now)
        current = self.current_bps
        config = self.config
        if wanted <= current * (1 - config.min_change):
            pass  # congestion: at once
        elif wanted >= current * (1 + config.min_change) or (wanted == config.max_bps and wanted > current):
            if now - self._last_change < config.increase_hold_s or self._queue_above_low(now):
                return None
            step = int(current * config.max_step_up)
            carried = self.sent_bps(now) or current
            for receiver in self._receivers.values():  # carried more, and no loss now: that link grew
                capacity = receiver.capacity_bps
                clean = (receiver.last_loss or 0.0) < config.loss_low
                if capacity is not None and clean and carried > capacity * config.near_reset:
                    receiver.capacity_bps = None
            capacity = self.capacity_bps
            if capacity is not None and step > capacity * config.near_fraction:
                step = max(int(capacity * config.near_fraction), int(current * config.near_step_up))
            wanted = min(wanted, step)
        else:
            return None
        self.current_bps = wanted
        self._last_change = now
        self.changes += 1
        return wanted

    def _queue_above_low(self, now: float) -> bool:
        """One of a receiver's last two round trips (the latest within `stale_after_s`) shows a queue, or it
        has reported for less than `rtt_grace_s` without two round trips yet (its first reports answer no
        sender report, and a first round trip is its own base): no increase into a queue, nor before the
        queue can be seen. A receiver that never gives round trips stops blocking after the grace time (the
        loss-based rule alone then decides)."""
        for receiver in self._receivers.values():
            queue = receiver.delay_queue(now, self.config.stale_after_s)
            if queue.previous_queue_s is None:  # none, or one round trip: its own base, it shows nothing yet
                started = receiver.first_report_at
                if started is not None and now - started < self.config.rtt_grace_s:
                    return True
            elif queue is receiver.transit:
                # 10-20 samples a second: one frame's burst (a keyframe) shows in a sample or two; only a
                # queue that stood through the last `transit_quiet_span_s` holds an increase back
                standing = queue.standing(now, self.config.transit_quiet_span_s)
                if standing is not None and standing >= self.config.delay_low_s:
                    return True
            elif not queue.quiet(self.config.delay_low_s):
                if now - queue.last_at <= self.config.stale_after_s:
                    return True
        return False

    def worst_path(self) -> tuple[float | None, float | None]:
        """(largest queueing delay in s, largest fraction lost) over the receivers' latest reports (the
        transport-cc queue for receivers that sent feedback)."""
        paths = [r.transit if r.transit is not None else r.queue for r in self._receivers.values()]
        queues = [q.queue_s for q in paths if q.queue_s is not None]
        losses = [r.last_loss for r in self._receivers.values() if r.last_loss is not None]
        return (max(queues) if queues else None), (max(losses) if losses else None)

    def snapshot(self, now: float) -> dict[str, object]:
        """For /sessions: the target and each receiver's inputs."""
        return {
            "target_bps": self.current_bps,
            "ceiling_bps": self.config.max_bps,
            "capacity_bps": self.capacity_bps,
            "sent_bps": int(self.sent_bps(now)),
            "changes": self.changes,
            "receivers": [
                {
                    "remb_bps": int(r.remb_bps) if r.remb_bps is not None else None,
                    "remb_age_s": round(now - r.remb_at, 2) if r.remb_bps is not None else None,
                    "loss": r.last_loss,
                    "loss_based_bps": int(r.loss_based_bps),
                    "delay_based_bps": int(r.delay_based_bps),
                    "rtt_ms": _ms(r.queue.last_rtt_s),
                    "queue_ms": _ms(r.queue.queue_s),
                    "reverse_queue_ms": _ms(r.reverse_queue_s),
                    # transport-cc: the one-way queue, and how many feedback packets gave it
                    "transit_queue_ms": _ms(r.transit.queue_s) if r.transit is not None else None,
                    "transit_samples": r.transit_samples,
                    "capacity_bps": int(r.capacity_bps) if r.capacity_bps is not None else None,
                }
                for r in self._receivers.values()
            ],
        }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 1)
