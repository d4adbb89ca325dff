"""The retransmission budget (gateway.webrtc.congestion.retransmit_budget): pure, explicit times."""

from __future__ import annotations

from gateway.webrtc.congestion.retransmit_budget import RetransmitBudget


def test_retransmissions_stay_within_the_target_rate() -> None:
    budget = RetransmitBudget(window_s=1.0, min_interval_s=0.1)
    # a NACK storm: 1000 different 1000-byte packets asked for within 100 ms, the target at 400 kbit/s
    allowed = sum(budget.allow(seq, 1000, 400_000, now=seq * 0.0001) for seq in range(1000))
    # one window's worth (400 kbit = 50 packets of 8 kbit) and what 100 ms at the target refills (4)
    assert allowed == 54
    assert budget.counters() == {
        "sent": 54,
        "skipped_budget": 946,
        "skipped_repeat": 0,
        "skipped_given_up": 0,
        "repair_keyframes": 0,
    }
    # the bucket refills at the target rate: 0.5 s later, 25 more
    later = sum(budget.allow(seq, 1000, 400_000, now=0.6) for seq in range(2000, 2100))
    assert later == 25


def test_one_packet_is_not_resent_within_a_round_trip() -> None:
    budget = RetransmitBudget(min_interval_s=0.1)
    assert budget.allow(7, 500, 1_000_000, now=0.0)
    assert not budget.allow(7, 500, 1_000_000, now=0.05)  # NACKed again before the first copy could arrive
    assert budget.allow(7, 500, 1_000_000, now=0.11)
    assert not budget.allow(7, 500, 1_000_000, now=0.25, rtt_s=0.3)  # a 300 ms round trip: wait for it
    assert budget.allow(7, 500, 1_000_000, now=0.42, rtt_s=0.3)
    assert budget.counters()["skipped_repeat"] == 2


def test_a_falling_target_shrinks_the_bucket_at_once() -> None:
    budget = RetransmitBudget(window_s=1.0)
    assert budget.allow(1, 1000, 2_000_000, now=0.0)
    # the target fell to 100 kbit/s: at most 100 kbit in the bucket, whatever was saved before
    allowed = sum(budget.allow(seq, 1000, 100_000, now=0.001) for seq in range(2, 100))
    assert allowed == 12


def test_a_backlog_the_budget_cannot_resend_soon_is_repaired_with_a_keyframe() -> None:
    budget = RetransmitBudget(window_s=1.0, catch_up_s=0.5, keyframe_gap_s=1.0)
    rate = 160_000  # the target just after a fall: 20 packets of 1000 bytes a second
    sent = sum(budget.allow(seq, 1000, rate, now=0.0) for seq in range(100))  # ~100 packets were dropped
    assert sent == 20
    assert budget.wants_keyframe(
        rate, now=0.0, newest_sent=lambda: 99
    )  # 80 packets = 4 s of the budget: a keyframe instead
    assert budget.counters()["repair_keyframes"] == 1
    # the receiver NACKs them again until the keyframe reaches it: they are given up, the bucket kept
    assert not any(budget.allow(seq, 1000, rate, now=0.2) for seq in range(20, 100))
    assert budget.counters()["skipped_given_up"] == 80
    assert budget.allow(500, 1000, rate, now=0.2)  # a later packet's loss is still repaired
    assert not budget.wants_keyframe(rate, now=0.2, newest_sent=lambda: 500)
    # given-up sequence numbers are forgotten after a while (16-bit numbers come round again)
    assert budget.allow(50, 1000, rate, now=10.0)


def test_a_small_backlog_is_left_to_the_budget_and_keyframes_are_spaced() -> None:
    budget = RetransmitBudget(window_s=1.0, catch_up_s=0.5, keyframe_gap_s=1.0)
    rate = 160_000
    assert sum(budget.allow(seq, 1000, rate, now=0.0) for seq in range(28)) == 20
    assert not budget.wants_keyframe(
        rate, now=0.0, newest_sent=lambda: 99
    )  # 8 packets = 64 kbit, under 0.5 s of the budget
    assert sum(budget.allow(seq, 1000, rate, now=0.01) for seq in range(28, 60)) == 0
    assert budget.wants_keyframe(rate, now=0.01, newest_sent=lambda: 59)
    assert sum(budget.allow(seq, 1000, rate, now=0.02) for seq in range(60, 100)) == 0
    assert not budget.wants_keyframe(rate, now=0.5, newest_sent=lambda: 99)  # within a second of the last one
    assert budget.wants_keyframe(rate, now=1.1, newest_sent=lambda: 99)
    assert budget.counters()["repair_keyframes"] == 2


def test_refused_packets_that_are_later_resent_leave_the_backlog() -> None:
    budget = RetransmitBudget(window_s=1.0, catch_up_s=0.5)
    rate = 160_000
    assert sum(budget.allow(seq, 1000, rate, now=0.0) for seq in range(40)) == 20
    # the bucket refills and the receiver asks again: all 20 refused packets go out within 1.1 s
    assert sum(budget.allow(seq, 1000, rate, now=1.1) for seq in range(20, 40)) == 20
    assert not budget.wants_keyframe(rate, now=1.1, newest_sent=lambda: 99)
