"""The retransmission budget (gateway.media.retransmit_budget): pure, explicit times."""

from __future__ import annotations

from gateway.media.retransmit_budget import RetransmitBudget


def test_retransmissions_stay_within_the_target_rate() -> None:
    budget = RetransmitBudget(window_s=1.0, min_interval_s=0.1)
    # a NACK storm: 1000 different 1000-byte packets asked for within 100 ms, the target at 400 kbit/s
    allowed = sum(budget.allow(seq, 1000, 400_000, now=seq * 0.0001) for seq in range(1000))
    # one window's worth (400 kbit = 50 packets of 8 kbit) and what 100 ms at the target refills (4)
    assert allowed == 54
    assert budget.counters() == {"sent": 54, "skipped_budget": 946, "skipped_repeat": 0}
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
