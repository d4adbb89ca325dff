"""The per-client-address token buckets of the HTTP control plane (gateway.http.rate_limit), fake clock."""

from __future__ import annotations

import pytest

from gateway.http.rate_limit import RateLimitConfig, TokenBuckets


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_burst_then_refused_with_the_wait_until_the_next_token() -> None:
    clock = Clock()
    buckets = TokenBuckets(RateLimitConfig(rate_per_s=2.0, burst=3), clock)
    assert [buckets.take("10.0.0.1") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("10.0.0.1") == pytest.approx(0.5)  # one token every 0.5 s
    clock.t += 0.25
    assert buckets.take("10.0.0.1") == pytest.approx(0.25)
    clock.t += 0.25
    assert buckets.take("10.0.0.1") == 0.0
    assert buckets.take("10.0.0.1") > 0.0
    assert buckets.limited == 3


def test_each_address_has_its_own_bucket_and_loopback_is_not_special() -> None:
    buckets = TokenBuckets(RateLimitConfig(rate_per_s=1.0, burst=1), Clock())
    assert buckets.take("127.0.0.1") == 0.0
    assert buckets.take("127.0.0.1") > 0.0
    assert buckets.take("192.0.2.7") == 0.0


def test_an_idle_client_refills_only_up_to_the_burst() -> None:
    clock = Clock()
    buckets = TokenBuckets(RateLimitConfig(rate_per_s=10.0, burst=2), clock)
    buckets.take("a")
    clock.t += 3600
    assert [buckets.take("a") for _ in range(3)][:2] == [0.0, 0.0]
    assert buckets.take("a") > 0.0


def test_the_table_of_clients_is_bounded() -> None:
    buckets = TokenBuckets(RateLimitConfig(rate_per_s=1.0, burst=1, max_clients=3), Clock())
    for i in range(10):
        buckets.take(f"10.0.0.{i}")
    assert len(buckets) == 3


def test_zero_rate_turns_the_limit_off() -> None:
    buckets = TokenBuckets(RateLimitConfig(rate_per_s=0.0, burst=1), Clock())
    assert all(buckets.take("a") == 0.0 for _ in range(1000))


@pytest.mark.parametrize(
    "kwargs", [{"rate_per_s": -1.0}, {"rate_per_s": float("inf")}, {"burst": 0}, {"max_clients": 0}]
)
def test_bad_config_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RateLimitConfig(**kwargs)  # type: ignore[arg-type]
