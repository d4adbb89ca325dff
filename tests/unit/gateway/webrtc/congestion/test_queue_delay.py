"""The delay-based half of the fan-out encoder's bitrate (gateway.webrtc.congestion.queue_delay,
gateway.webrtc.congestion.bitrate)
and the round trips `watch_sender_feedback` measures from receiver reports."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiortc.rtp import RtcpReceiverInfo, RtcpRrPacket, RtcpSenderInfo, RtcpSrPacket

from gateway.webrtc.congestion.bitrate import BitrateConfig, BitratePolicy
from gateway.webrtc.congestion.queue_delay import AbsSendClock, OneWayDelay, QueueDelay
from gateway.webrtc.congestion.sender_feedback import watch_sender_feedback

CONFIG = BitrateConfig(
    max_bps=1_000_000, min_bps=100_000, start_fraction=1.0, start_cap_bps=1_000_000, increase_hold_s=2.0
)


def test_queueing_delay_is_the_round_trip_above_the_lowest_of_the_window() -> None:
    queue = QueueDelay(window_s=10.0)
    assert queue.add(0.050, now=0.0) == 0.0
    assert queue.add(0.040, now=1.0) == 0.0  # a lower round trip is the new base
    assert queue.add(0.140, now=2.0) == pytest.approx(0.100)
    assert queue.add(0.090, now=3.0) == pytest.approx(0.050)
    assert queue.draining(by_s=0.02) and not queue.draining(by_s=0.06)
    assert queue.add(0.120, now=12.5) == pytest.approx(0.030)  # the 40 ms sample left the window: base 90
    assert queue.base_s == pytest.approx(0.090)


def test_a_standing_queue_is_two_high_reports_in_a_row_not_one_burst() -> None:
    queue = QueueDelay()
    queue.add(0.040, now=0.0)
    queue.add(0.140, now=1.0)  # one keyframe's burst
    assert not queue.filling(high_s=0.08, drain_s=0.02)
    queue.add(0.045, now=2.0)
    queue.add(0.130, now=3.0)
    queue.add(0.150, now=4.0)  # 90 then 110 ms: standing, and growing
    assert queue.filling(high_s=0.08, drain_s=0.02)
    queue.add(0.125, now=5.0)  # still high, but 25 ms less: a cut is taking hold
    assert not queue.filling(high_s=0.08, drain_s=0.02)
    fresh = QueueDelay()
    fresh.add(0.040, now=0.0)
    fresh.add(0.210, now=1.0)  # 170 ms at once: more than any one frame queues
    assert fresh.filling(high_s=0.08, drain_s=0.02)


def test_one_way_queue_is_the_lowest_recent_transit_above_the_lowest_of_the_window() -> None:
    path = OneWayDelay(window_s=30.0, recent_s=0.5)
    assert path.standing(now=0.0) == 0.0  # nothing measured: nothing subtracted
    for i in range(30):  # 15 fps, an empty path: transit 100 ms (clock offset and all)
        path.add(media_s=i / 15, arrival_s=i / 15 + 0.100)
    assert path.standing(now=29 / 15) == pytest.approx(0.0)
    t0 = 30 / 15
    for i in range(8):  # a queue of 120 ms, and one frame of them 60 ms later still (a burst)
        path.add(media_s=t0 + i / 15, arrival_s=t0 + i / 15 + 0.220 + (0.060 if i == 5 else 0.0))
    now = t0 + 7 / 15 + 0.22
    assert path.standing(now) == pytest.approx(0.120)
    assert path.standing(now + 1.0) == 0.0  # no media for a second: an idle path
    path.add(media_s=47_000.0, arrival_s=now + 1.0)  # the RTP timestamp wrapped: a new base
    assert path.standing(now + 1.0) == 0.0


def _send(policy: BitratePolicy, kbps: float, start: float, seconds: float) -> None:
    frames = int(seconds * 15)
    for i in range(frames):
        policy.on_sent(int(kbps * 1000 / 8 / 15), now=start + i / 15)


def _sending(kbps: float) -> BitratePolicy:
    """A policy with one receiver whose encoder sent `kbps` over the first second."""
    policy = BitratePolicy(CONFIG)
    policy.add("viewer")
    _send(policy, kbps, start=0.0, seconds=1.0)
    return policy


def test_a_filling_queue_cuts_the_rate_before_any_loss_and_a_draining_one_does_not_cut_again() -> None:
    policy = _sending(700)
    policy.on_loss("viewer", 0.0, now=1.0)
    policy.on_rtt("viewer", 0.040, now=1.0)
    assert policy.update(1.0) is None  # an empty queue: nothing to do
    _send(policy, 700, start=1.0, seconds=1.0)
    policy.on_loss("viewer", 0.0, now=2.0)  # no loss yet: the loss-based rule alone would wait for drops
    policy.on_rtt("viewer", 0.140, now=2.0)  # 100 ms queued: once could be a burst
    assert policy.update(2.0) is None
    _send(policy, 700, start=2.0, seconds=1.0)
    policy.on_loss("viewer", 0.0, now=3.0)
    policy.on_rtt("viewer", 0.160, now=3.0)  # 120 ms: a standing, growing queue
    target = policy.update(3.0)
    assert target is not None and target == pytest.approx(0.85 * policy.sent_bps(3.0), rel=0.01)
    _send(policy, target / 1000, start=3.0, seconds=1.0)
    policy.on_rtt("viewer", 0.130, now=4.0)  # still 80+ ms, but 30 ms less than before: draining
    assert policy.update(4.0) is None and policy.current_bps == target


def test_the_publishers_own_uplink_queue_is_not_ours_to_drain() -> None:
    policy = _sending(700)
    policy.on_rtt("viewer", 0.040, now=1.0)
    for t in (2.0, 3.0, 4.0):  # the reports queued 150 ms behind the publisher's own media
        policy.on_rtt("viewer", 0.195, now=t, reverse_queue_s=0.150)
        assert policy.update(t) is None
    policy.on_rtt("viewer", 0.040, now=5.0, reverse_queue_s=0.060)  # over-corrected: an artefact, skipped
    snapshot = policy.snapshot(5.0)["receivers"]
    assert isinstance(snapshot, list) and snapshot[0]["queue_ms"] == 5.0
    assert snapshot[0]["reverse_queue_ms"] == 60.0


def test_an_empty_queue_lets_the_rate_climb_back_but_not_while_the_receiver_reports_loss() -> None:
    policy = _sending(600)
    policy.on_rtt("viewer", 0.040, now=1.0)
    policy.on_rtt("viewer", 0.200, now=1.1)
    policy.on_rtt("viewer", 0.210, now=1.2)
    cut = policy.update(1.2)
    assert cut is not None and cut < 600_000
    policy.on_loss("viewer", 0.05, now=2.0)
    policy.on_rtt("viewer", 0.041, now=2.0)
    assert policy.estimate(2.0) == cut  # an empty queue but lossy: hold
    t = 2.0
    while policy.current_bps < CONFIG.max_bps and t < 60.0:
        t += 1.0
        policy.on_loss("viewer", 0.0, now=t)
        policy.on_rtt("viewer", 0.041, now=t)
        policy.update(t)
    assert policy.current_bps == CONFIG.max_bps and t > 10.0  # +8 % a report, at most every 2 s


def test_a_moderate_queue_holds_the_rate() -> None:
    policy = _sending(800)
    policy.on_rtt("viewer", 0.040, now=1.0)
    policy.on_rtt("viewer", 0.090, now=2.0)  # 50 ms: between the low and high marks
    assert policy.estimate(2.0) == CONFIG.max_bps
    snapshot = policy.snapshot(2.0)["receivers"]
    assert isinstance(snapshot, list)
    assert snapshot[0]["queue_ms"] == 50.0 and snapshot[0]["rtt_ms"] == 90.0


def test_delay_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        BitrateConfig(delay_low_s=0.1, delay_high_s=0.05)
    with pytest.raises(ValueError):
        BitrateConfig(delay_decrease=1.2)


class _Sender:
    """What `watch_sender_feedback` touches of an aiortc RTCRtpSender."""

    def __init__(self) -> None:
        self._ssrc = 1234
        self.sent: list[Any] = []

    async def _handle_rtcp_packet(self, packet: Any) -> None:
        return None

    async def _send_rtcp(self, packets: list[Any]) -> None:
        self.sent.extend(packets)


def _sr(ssrc: int, ntp: int) -> RtcpSrPacket:
    info = RtcpSenderInfo(ntp_timestamp=ntp, rtp_timestamp=0, packet_count=0, octet_count=0)
    return RtcpSrPacket(ssrc=ssrc, sender_info=info)


def _rr(ssrc: int, lsr: int, dlsr_s: float) -> RtcpRrPacket:
    report = RtcpReceiverInfo(
        ssrc=ssrc,
        fraction_lost=0,
        packets_lost=0,
        highest_sequence=0,
        jitter=0,
        lsr=lsr,
        dlsr=int(dlsr_s * 65536),
    )
    return RtcpRrPacket(ssrc=99, reports=[report])


def test_round_trips_come_from_reports_answering_any_recent_sender_report() -> None:
    sender = _Sender()
    rtts: list[float] = []
    calls: list[str] = []

    def on_rtt(rtt: float, now: float) -> None:
        rtts.append(rtt)
        calls.append("rtt")

    assert watch_sender_feedback(
        sender,
        lambda *_: None,
        lambda *_: calls.append("loss"),
        on_rtt,  # type: ignore[arg-type]
    )

    async def run() -> None:
        older, newer = (1 << 48) | (7 << 16), (2 << 48) | (9 << 16)
        await sender._send_rtcp([_sr(1234, older)])
        await sender._send_rtcp([_sr(1234, newer), _sr(4321, 5 << 32)])  # another SSRC's SR is not ours
        await asyncio.sleep(0.05)
        # aiortc only remembers the newer SR; this report answers the older one and still counts
        await sender._handle_rtcp_packet(_rr(1234, (older >> 16) & 0xFFFFFFFF, dlsr_s=0.02))
        await sender._handle_rtcp_packet(_rr(1234, 0, dlsr_s=0.0))  # no SR received yet: no sample
        await sender._handle_rtcp_packet(_rr(1234, 12345, dlsr_s=0.0))  # an SR we never sent
        await sender._handle_rtcp_packet(_rr(777, (newer >> 16) & 0xFFFFFFFF, dlsr_s=0.0))  # not about us

    started = time.monotonic()
    asyncio.run(run())
    assert len(rtts) == 1
    assert calls[:2] == ["rtt", "loss"]  # the policy sees the queue before the loss report may raise the rate
    assert 0.05 - 0.02 - 0.002 <= rtts[0] <= time.monotonic() - started - 0.02  # now - sent - dlsr
    assert len(sender.sent) == 3


def test_no_increase_before_the_queue_can_be_seen_unless_the_receiver_never_shows_it() -> None:
    policy = BitratePolicy(BitrateConfig(max_bps=1_000_000, start_fraction=0.5, rtt_grace_s=5.0))
    policy.add("viewer")
    assert policy.current_bps == 500_000
    policy.on_loss("viewer", 0.0, now=1.0)  # its first report answers no sender report yet: no round trip
    assert policy.update(3.5) is None
    policy.on_rtt("viewer", 0.040, now=3.8)  # a first round trip is its own base: it shows nothing yet
    assert policy.update(3.8) is None
    policy.on_rtt("viewer", 0.041, now=4.0)  # now the queue can be seen, and it is empty
    assert policy.update(4.0) == 625_000
    policy.on_rtt("viewer", 0.090, now=5.0)  # 50 ms queued
    policy.on_rtt("viewer", 0.042, now=6.0)  # empty again, but one of the last two was not: wait
    assert policy.update(6.5) is None
    silent = BitratePolicy(BitrateConfig(max_bps=1_000_000, start_fraction=0.5, rtt_grace_s=5.0))
    silent.add("viewer")
    silent.on_loss("viewer", 0.0, now=1.0)
    assert silent.update(4.0) is None
    assert silent.update(6.5) == 625_000  # a receiver without LSR/DLSR: the loss-based rule alone, after 5 s


def test_abs_send_time_unwraps_its_64_second_cycle_and_places_a_reordered_packet_before_the_wrap() -> None:
    clock = AbsSendClock()
    tick = 1 << 18  # one second in 6.18 fixed point
    assert clock.seconds(int(62.5 * tick)) == pytest.approx(62.5)
    assert clock.seconds(int(63.9 * tick)) == pytest.approx(63.9, abs=1e-5)
    assert clock.seconds(int(0.2 * tick)) == pytest.approx(64.2, abs=1e-5)  # wrapped
    assert clock.seconds(int(63.95 * tick)) == pytest.approx(63.95, abs=1e-5)  # late, from before the wrap
    assert clock.seconds(int(0.3 * tick)) == pytest.approx(64.3, abs=1e-5)


def test_a_flood_of_samples_is_bounded_in_count() -> None:
    queue = QueueDelay(window_s=30.0)
    path = OneWayDelay(window_s=30.0)
    for i in range(20_000):  # 20,000 receiver reports / RTP timestamps within one second
        queue.add(0.040 + (i % 7) * 0.001, now=i / 20_000)
        path.add(media_s=i / 20_000, arrival_s=i / 20_000 + 0.05)
    assert len(queue._samples) <= 256 and len(path._samples) <= 4096
    assert queue.base_s == pytest.approx(0.040)
