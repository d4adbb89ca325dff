"""Transport-cc feedback on the send side: matching feedback to what was sent
(gateway.webrtc.congestion.send_history)
and the bitrate policy's one-way delay rule (BitratePolicy.on_transit). Pure, explicit times."""

from __future__ import annotations

from gateway.webrtc.congestion.bitrate import BitrateConfig, BitratePolicy
from gateway.webrtc.congestion.send_history import SendHistory
from gateway.webrtc.congestion.transport_feedback import TransportFeedback

CONFIG = BitrateConfig(max_bps=1_000_000, min_bps=100_000, start_fraction=1.0, start_cap_bps=1_000_000)
OFFSET_S = 1234.5  # the receiver's clock runs this far from ours: only differences of transit matter


def feedback(arrivals: list[tuple[int, float | None]]) -> TransportFeedback:
    reported = [(seq, None if at is None else int(at * 1e6)) for seq, at in arrivals]
    return TransportFeedback(1, 2, arrivals[0][0], 0, 0, reported)


def test_feedback_gives_the_lowest_transit_losses_and_the_acked_rate() -> None:
    history = SendHistory(acked_window_s=1.0)
    for seq in range(40):  # 1000-byte packets, one every 25 ms
        history.sent(seq, seq * 0.025, 1000)
    first = history.on_feedback(feedback([(s, s * 0.025 + OFFSET_S + 0.010) for s in range(10)]))
    assert first.transit_s is not None and abs(first.transit_s - (OFFSET_S + 0.010)) < 1e-6
    assert (first.received, first.lost, first.acked_bps) == (10, 0, None)  # 225 ms of arrivals: too short
    # a queue building up: each packet waits 5 ms longer than the one before; one lost
    arrivals: list[tuple[int, float | None]] = [
        (s, s * 0.025 + OFFSET_S + 0.010 + (s - 10) * 0.005) for s in range(10, 40)
    ]
    arrivals[5] = (15, None)
    second = history.on_feedback(feedback(arrivals))
    assert (second.received, second.lost) == (29, 1)
    assert (
        second.transit_s is not None and abs(second.transit_s - (OFFSET_S + 0.010)) < 1e-6
    )  # its first packet
    assert second.acked_bps is not None and 200_000 < second.acked_bps < 330_000  # 1000 B / 30 ms at the end
    unknown = history.on_feedback(feedback([(500, OFFSET_S)]))  # never sent (or forgotten): ignored
    assert (unknown.transit_s, unknown.received, unknown.lost) == (None, 0, 0)


def test_history_is_bounded() -> None:
    history = SendHistory(history=100)
    for seq in range(70_000):
        history.sent(seq, seq * 0.001, 100)
    sample = history.on_feedback(feedback([((70_000 - 1) & 0xFFFF, 100.0), (5, 100.0)]))
    assert sample.received == 1  # the newest is remembered, a wrapped-away old one is not


def transits(policy: BitratePolicy, start: float, end: float, queue_s: float, acked_bps: float) -> float:
    t = start
    while t < end:
        policy.on_transit("viewer", OFFSET_S + 0.020 + queue_s, acked_bps, t)
        policy.update(t)
        t += 0.05
    return t


def test_a_standing_one_way_queue_cuts_within_two_feedback_packets_and_again_only_while_it_grows() -> None:
    policy = BitratePolicy(CONFIG)
    policy.add("viewer")
    transits(policy, 0.0, 3.0, 0.0, 900_000)  # a clean path: its base transit
    assert policy.current_bps == 1_000_000
    policy.on_transit("viewer", OFFSET_S + 0.020 + 0.100, 900_000, 3.05)  # 100 ms queued: could be one burst
    assert policy.update(3.05) is None
    policy.on_transit("viewer", OFFSET_S + 0.020 + 0.110, 900_000, 3.10)  # standing: 0.85 x what arrived
    assert policy.update(3.10) == 765_000
    # still queued 50 ms later, and arriving slower now: no second cut inside the hold
    policy.on_transit("viewer", OFFSET_S + 0.020 + 0.115, 700_000, 3.15)
    assert policy.update(3.15) is None and policy.current_bps == 765_000
    # past the hold, a queue standing lower than at the cut is draining (slowly): no second cut
    policy.on_transit("viewer", OFFSET_S + 0.020 + 0.105, 700_000, 3.50)
    assert policy.update(3.50) is None and policy.current_bps == 765_000
    # a queue standing higher than at the cut: the cut was not enough, cut again from what arrives now
    policy.on_transit("viewer", OFFSET_S + 0.020 + 0.120, 700_000, 4.15)
    assert policy.update(4.15) == 595_000
    # the link's capacity: the most that arrived at the cuts of this episode, not what the cuts left
    assert policy.capacity_bps == 900_000
    # more than `transit_episode_s` after the last cut, a standing queue is new congestion even below the
    # queue the last cut saw (measured: 120-170 ms standing for 4 s, uncut until packets were dropped)
    transits(policy, 4.2, 8.0, 0.0, 600_000)  # drained
    policy.on_transit("viewer", OFFSET_S + 0.020 + 0.100, 580_000, 8.05)
    policy.on_transit("viewer", OFFSET_S + 0.020 + 0.105, 580_000, 8.10)
    assert policy.update(8.10) == int(0.85 * 580_000)
    assert policy.capacity_bps == 580_000  # a new episode: its own arrival rate


def test_quiet_feedback_grows_the_delay_based_rate_per_second_not_per_packet() -> None:
    policy = BitratePolicy(BitrateConfig(max_bps=1_000_000, min_bps=100_000, start_fraction=0.5))
    policy.add("viewer")
    for t in (0.0, 0.05):
        policy.on_transit("viewer", OFFSET_S + 0.3, 200_000, t)
    policy.on_transit("viewer", OFFSET_S + 0.3 + 0.3, 200_000, 0.1)  # filling
    cut = policy.snapshot(0.1)["receivers"][0]["delay_based_bps"]  # type: ignore[index]
    assert cut == 170_000
    transits(policy, 0.15, 1.14, 0.0, 200_000)  # one second of quiet feedback, 20 packets
    grown = policy.snapshot(1.2)["receivers"][0]["delay_based_bps"]  # type: ignore[index]
    assert 170_000 * 1.07 < grown < 170_000 * 1.09  # delay_increase once a second, not 1.08 ** 20


def test_a_clock_jump_at_the_receiver_is_not_a_queue() -> None:
    policy = BitratePolicy(CONFIG)
    policy.add("viewer")
    transits(policy, 0.0, 1.0, 0.0, 900_000)
    for t in (1.0, 1.05, 1.1):  # its reference time wrapped: transit 40 s later, constant
        policy.on_transit("viewer", OFFSET_S + 40.0, 900_000, t)
        policy.update(t)
    assert policy.current_bps == 1_000_000
    assert policy.snapshot(1.1)["receivers"][0]["transit_queue_ms"] == 0.0  # type: ignore[index]


def test_round_trips_do_not_drive_the_rate_while_transport_cc_feedback_is_fresh() -> None:
    policy = BitratePolicy(CONFIG)
    policy.add("viewer")
    transits(policy, 0.0, 3.0, 0.0, 900_000)
    for t in (3.0, 4.0, 5.0):  # round trips say 200 ms queued (the reverse path's, e.g.); transit says none
        policy.on_rtt("viewer", 0.040 if t == 3.0 else 0.240, now=t)
        policy.on_transit("viewer", OFFSET_S + 0.020, 900_000, t)
        assert policy.update(t) is None
    assert policy.current_bps == 1_000_000


def test_a_delay_cut_clears_the_hysteresis_when_more_arrived_than_the_target() -> None:
    """The encoder overshoots its target now and then: 0.85 x what arrived could then be less than a 15 %
    cut of the target, and the hysteresis (`min_change`) would swallow it while the queue grows on."""
    policy = BitratePolicy(CONFIG)
    policy.add("viewer")
    transits(policy, 0.0, 3.0, 0.0, 900_000)
    for t in (3.05, 3.10):
        policy.on_transit(
            "viewer", OFFSET_S + 0.020 + 0.110, 1_050_000, t
        )  # 5 % more than the target arrived
    assert policy.update(3.10) == 850_000


def test_one_bursty_feedback_sample_does_not_hold_an_increase_back_but_a_standing_queue_does() -> None:
    config = BitrateConfig(max_bps=1_000_000, min_bps=100_000, start_fraction=0.5, increase_hold_s=0.0)
    bursty, standing = BitratePolicy(config), BitratePolicy(config)
    for policy in (bursty, standing):
        policy.add("viewer")
        policy.on_loss("viewer", 0.0, now=0.0)
        transits(policy, 0.0, 6.0, 0.0, 500_000)  # past the grace time; the rate climbed from 500 kbit/s
    t = 6.0
    for k in range(10):  # half a second of feedback, 50 ms apart
        burst = 0.040 if k == 9 else 0.0  # a keyframe queued 40 ms behind it, in the newest sample only
        bursty.on_transit("viewer", OFFSET_S + 0.020 + burst, 500_000, t)
        standing.on_transit("viewer", OFFSET_S + 0.020 + 0.040, 500_000, t)
        t += 0.05
    assert not bursty._queue_above_low(t)
    assert standing._queue_above_low(t)
