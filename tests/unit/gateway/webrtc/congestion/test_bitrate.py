"""The fan-out encoder's bitrate policy (gateway.webrtc.congestion.bitrate): pure, driven by explicit
times."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.webrtc.congestion.bitrate import BitrateConfig, BitratePolicy, size_class_bitrate

CONFIG = BitrateConfig(
    max_bps=1_000_000, min_bps=100_000, start_fraction=1.0, start_cap_bps=1_000_000, increase_hold_s=2.0
)


def test_starts_at_the_start_fraction_and_holds_without_feedback() -> None:
    unknown_link = BitratePolicy(BitrateConfig(max_bps=1_000_000))
    assert unknown_link.current_bps == 1_000_000  # no receiver: an encoder used offline runs at its rate
    unknown_link.add("first viewer")
    assert unknown_link.current_bps == 500_000
    policy = BitratePolicy(CONFIG)
    policy.add("viewer")
    assert policy.update(10.0) is None and policy.current_bps == 1_000_000


def test_heavy_loss_cuts_the_rate_at_once_and_clean_reports_climb_back_slowly() -> None:
    policy = BitratePolicy(CONFIG)
    policy.on_loss("viewer", 0.40, now=1.0)  # GCC: rate * (1 - 0.5 * loss)
    assert policy.update(1.0) == 800_000
    policy.on_loss("viewer", 0.40, now=2.0)
    assert policy.update(2.0) == 640_000
    for step in range(3, 30):
        policy.on_loss("viewer", 0.0, now=float(step))  # < 2 %: +5 % per report
        policy.update(float(step))
    assert policy.current_bps == 1_000_000
    policy.on_loss("viewer", 0.05, now=40.0)  # 2..10 %: hold
    assert policy.update(40.0) is None


def test_minimum_across_receivers_and_a_leaving_slow_viewer_releases_the_rest() -> None:
    policy = BitratePolicy(CONFIG)
    policy.add("fast")
    for second in range(6):  # one report a second
        policy.on_loss("slow", 0.5, now=1.0 + second)
        policy.update(1.0 + second)
    assert policy.current_bps < 200_000
    policy.remove("slow")
    assert policy.update(6.5) is None  # increases wait for the hold time
    low = policy.current_bps
    assert policy.update(8.5) == int(low * 1.25)  # and climb by at most 25 % a step: the link is unknown
    t = 8.5
    while policy.current_bps < 1_000_000 and t < 30:
        t += 2.0
        policy.update(t)
    assert policy.current_bps == 1_000_000


def test_the_floor_bounds_what_one_hopeless_receiver_does_to_everyone() -> None:
    policy = BitratePolicy(CONFIG)
    for t in range(20):
        policy.on_loss("hopeless", 0.9, now=float(t))
        policy.update(float(t))
    assert policy.current_bps == 100_000


def test_remb_counts_only_below_what_was_sent_and_with_loss() -> None:
    policy = BitratePolicy(CONFIG)
    for i in range(15):
        policy.on_sent(5_000, now=0.1 + i / 15)  # 600 kbit/s sent in the last second
    policy.on_remb("viewer", 150_000, now=1.0)
    assert policy.estimate(1.0) == 1_000_000  # no loss reported: an application-limited REMB, ignored
    policy.on_loss("viewer", 0.05, now=1.0)
    assert policy.estimate(1.0) == 150_000  # corroborated by loss and under the sent rate
    policy.on_remb("viewer", 580_000, now=1.1)
    assert policy.estimate(1.1) == 1_000_000  # at the sent rate: the link keeps up
    assert policy.estimate(20.0) == 1_000_000  # stale


def test_small_changes_do_not_restart_the_encoder() -> None:
    policy = BitratePolicy(CONFIG)
    policy.on_loss("viewer", 0.12, now=1.0)  # 1 - 0.06: a 6 % cut, under min_change
    assert policy.update(1.0) is None


def test_config_is_checked() -> None:
    with pytest.raises(ValueError):
        BitrateConfig(max_bps=100, min_bps=200)
    with pytest.raises(ValueError):
        BitrateConfig(loss_low=0.2, loss_high=0.1)


def test_the_default_ceiling_follows_libwebrtcs_size_classes_above_a_floor() -> None:
    assert {size_class_bitrate(w, h) for w, h in ((321, 240), (640, 360), (640, 480))} == {1_700_000}
    assert size_class_bitrate(641, 480) == size_class_bitrate(960, 540) == 2_000_000
    assert size_class_bitrate(1280, 720) == size_class_bitrate(1920, 1080) == 2_500_000
    # libwebrtc's 600 kbit/s for 320x240 and under is raised to the floor: this is a second encode
    assert {size_class_bitrate(w, h) for w, h in ((320, 240), (160, 120), (0, 0))} == {1_000_000}


def test_a_new_ceiling_restarts_an_unchanged_rate_and_keeps_what_links_showed() -> None:
    policy = BitratePolicy(BitrateConfig(max_bps=600_000))
    policy.add("viewer")
    assert policy.current_bps == 300_000
    policy.set_max(1_700_000)  # the first frame says 640x360: the start is half of its class, capped at 500k
    assert policy.config.max_bps == 1_700_000 and policy.current_bps == 500_000
    small = BitratePolicy(BitrateConfig(max_bps=1_000_000, start_fraction=0.3))
    small.add("viewer")
    assert small.current_bps == 300_000  # under the cap, the fraction decides
    with pytest.raises(ValueError, match="start_cap_bps"):
        BitrateConfig(start_cap_bps=50_000)

    slow = BitratePolicy(BitrateConfig(max_bps=1_000_000, start_fraction=1.0, start_cap_bps=1_000_000))
    slow.add("fast")
    slow.on_loss("slow", 0.4, now=1.0)
    assert slow.update(1.0) == 800_000
    slow.set_max(2_000_000)  # after a change: no jump; the slow link's estimate stays what it showed
    assert slow.current_bps == 800_000 and slow.estimate(1.5) == 800_000
    slow.remove("slow")
    assert slow.estimate(2.0) == 2_000_000  # the fast one's estimate sat at the old ceiling: it moves
    assert slow.update(3.5) == 1_000_000  # and the rate ramps there as any increase, 1.25x a step
    slow.set_max(600_000)  # a smaller picture: clamped at once
    assert slow.current_bps == 600_000 and slow.estimate(4.0) == 600_000
    slow.set_max(10)  # never under the floor
    assert slow.config.max_bps == slow.config.min_bps


def test_a_burst_of_lossy_reports_cuts_once_per_interval_and_round_trip() -> None:
    """Browsers send a receiver report with every NACK: during one burst of loss they come many times a
    second, each about packets sent before the last cut could act. One cut per 300 ms + RTT (libwebrtc)."""
    policy = BitratePolicy(CONFIG)
    policy.add("viewer")
    policy.on_rtt("viewer", 0.050, now=0.5)
    for k in range(10):  # ten reports in 250 ms, each saying 50 % lost
        policy.on_loss("viewer", 0.5, now=1.0 + 0.025 * k)
        policy.update(1.0 + 0.025 * k)
    assert policy.current_bps == 750_000  # one cut, not 0.75 ** 10
    policy.on_loss("viewer", 0.5, now=1.36)  # 300 ms + the 50 ms round trip later: the next one
    policy.update(1.36)
    assert policy.current_bps == 562_500
    # clean reports grow the rate 5 % a second however often they come
    for k in range(40):
        policy.on_loss("viewer", 0.0, now=2.0 + 0.025 * k)
    grown = policy.snapshot(3.0)["receivers"][0]["loss_based_bps"]  # type: ignore[index]
    assert 562_500 * 1.04 < grown < 562_500 * 1.11  # about 1.05 ** (1 s + the first report's gap)


def _climb(policy: BitratePolicy, start: float, end: float) -> list[int]:
    """Clean reports every second, the encoder sending its target, and loss-based estimates at the top:
    the targets the increase rule alone takes."""
    targets, t = [], start
    while t < end:
        t += 1.0
        policy.on_sent(policy.current_bps // 8, t - 0.5)
        policy.on_loss("viewer", 0.0, now=t)
        policy._receivers["viewer"].loss_based_bps = float(policy.config.max_bps)
        if policy.update(t) is not None:
            targets.append(policy.current_bps)
    return targets


def test_near_where_the_link_choked_the_rate_creeps_instead_of_stepping() -> None:
    """GCC's additive increase near the link's capacity: increases stop at `near_fraction` of what arrived
    when the link last choked, then move by `near_step_up`: the next overshoot is 8 %, not 25 %."""
    policy = BitratePolicy(replace(CONFIG, max_bps=2_000_000))
    policy.add("viewer")
    policy.current_bps = 600_000
    policy._receivers["viewer"].capacity_bps = 800_000.0  # what arrived at a delay-based cut
    # 600k -> 680k (0.85 x 800k, not 750k) -> 8 % steps
    assert _climb(policy, 1.0, 14.0) == [680_000, 734_400, 793_152, 856_604]  # (after the grace time)
    # carrying 1.15 x the estimate with clean reports: that link grew, full steps again
    assert _climb(policy, 14.0, 18.0) == [925_132, 1_156_415]
    assert policy.capacity_bps is None


def test_a_loss_cut_estimates_the_capacity_from_what_arrived() -> None:
    policy = BitratePolicy(CONFIG)
    policy.add("viewer")
    policy.on_sent(800_000 // 8, 0.5)  # the encoder under its 1 Mbit/s target: 800k sent
    policy.on_loss("viewer", 0.4, now=1.0)  # 40 % of it lost: 480k arrived
    assert policy.update(1.0) == 800_000 and policy.capacity_bps == 480_000
    assert policy.snapshot(1.0)["receivers"][0]["capacity_bps"] == 480_000  # type: ignore[index]
    policy.on_loss("viewer", 0.3, now=1.05)  # more loss within the interval: no second cut, no new estimate
    assert policy.capacity_bps == 480_000
    policy.remove("viewer")
    assert policy.capacity_bps is None  # it was that receiver's link
