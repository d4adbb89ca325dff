"""The in-process link impairment (loadgen.impair): netem's loss/delay/jitter model and tbf's bottleneck."""

from __future__ import annotations

import random

import pytest

from loadgen.impair import PROFILES, Impairment, LinkModel, parse_impairment


def test_loss_and_delay() -> None:
    link = LinkModel(Impairment(delay_ms=40, loss=0.03), random.Random(1))
    arrivals = [link.admit(1000, now=i * 0.01) for i in range(10_000)]
    dropped = sum(a is None for a in arrivals)
    assert 240 <= dropped <= 360  # 3 % of 10 000
    assert all(abs(a - i * 0.01 - 0.040) < 1e-9 for i, a in enumerate(arrivals) if a is not None)


def test_jitter_reorders_like_netem() -> None:
    link = LinkModel(Impairment(delay_ms=30, jitter_ms=30), random.Random(2))
    arrivals = [link.admit(1000, now=i * 0.005) for i in range(1000)]
    assert all(a is not None and 0.0 <= a - i * 0.005 <= 0.060 for i, a in enumerate(arrivals))
    assert sum(b < a for a, b in zip(arrivals, arrivals[1:], strict=False)) > 100  # type: ignore[operator]


def test_bottleneck_serialises_and_drops_what_would_wait_too_long() -> None:
    link = LinkModel(Impairment(rate_kbps=600, queue_ms=200), random.Random(3))
    # 1 Mbit/s offered for 2 s into 600 kbit/s: about 40 % dropped, nothing waits more than 200 ms
    arrivals = [(i * 0.012, link.admit(1500, now=i * 0.012)) for i in range(167)]
    passed = [(t, a) for t, a in arrivals if a is not None]
    assert 0.5 < len(passed) / len(arrivals) < 0.75
    assert max(a - t for t, a in passed) <= 0.2 + 1500 * 8 / 600_000 + 1e-9
    assert link.dropped_queue == len(arrivals) - len(passed)


def test_parse_profiles_and_specs() -> None:
    assert parse_impairment("loss3-delay40") is PROFILES["loss3-delay40"]
    spec = parse_impairment("delay=40,jitter=20,loss=2%,rate=600")
    assert (spec.delay_ms, spec.jitter_ms, spec.loss, spec.rate_kbps) == (40, 20, 0.02, 600)
    assert parse_impairment("loss=0.05").loss == 0.05
    with pytest.raises(ValueError, match="bad network impairment"):
        parse_impairment("latency=5")
    with pytest.raises(ValueError):
        Impairment(loss=1.5)


def test_netem_commands_for_kernels_that_have_it() -> None:
    assert PROFILES["clean"].netem_args() == []
    (cmd,) = PROFILES["delay40-jitter20-loss2"].netem_args()
    assert cmd == ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "40ms", "20ms", "loss", "2%"]
    root, tbf = PROFILES["bottleneck-600k"].netem_args()
    assert "tbf" in tbf and "600kbit" in tbf and root[root.index("handle") + 1] == "1:"
