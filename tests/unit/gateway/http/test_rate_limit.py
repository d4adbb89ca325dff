"""The per-client-address token buckets of the HTTP control plane (gateway.http.rate_limit), fake clock."""

from __future__ import annotations

import pytest
from aiohttp import web

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
        RateLimitConfig(**kwargs)


def _request(peer: str, forwarded: list[str] | None = None) -> web.Request:
    from aiohttp.test_utils import make_mocked_request
    from multidict import CIMultiDict

    headers = CIMultiDict(("X-Forwarded-For", v) for v in forwarded or [])
    request = make_mocked_request("GET", "/", headers=headers)
    return request.clone(remote=peer)


def test_x_forwarded_for_counts_only_from_a_trusted_proxy() -> None:
    from gateway.http.rate_limit import client_key, trusted_networks

    trusted = trusted_networks(RateLimitConfig(trusted_proxies=("10.0.0.0/8", "192.0.2.7")))
    # a client that sends the header itself chooses nothing
    assert client_key(_request("203.0.113.9", ["198.51.100.1"]), trusted) == "203.0.113.9"
    # through one trusted proxy: the address it appended
    assert client_key(_request("10.1.2.3", ["198.51.100.1"]), trusted) == "198.51.100.1"
    # a client's forged first hop is skipped: the rightmost untrusted address is the one a proxy saw
    key = client_key(_request("192.0.2.7", ["6.6.6.6, 198.51.100.2", "10.9.9.9"]), trusted)
    assert key == "198.51.100.2"
    # no header, or nothing but proxies, or garbage: the peer itself
    assert client_key(_request("10.1.2.3"), trusted) == "10.1.2.3"
    assert client_key(_request("10.1.2.3", ["10.4.4.4"]), trusted) == "10.1.2.3"
    assert client_key(_request("10.1.2.3", ["not-an-address"]), trusted) == "10.1.2.3"
    # without trusted proxies the header is never read
    assert client_key(_request("10.1.2.3", ["198.51.100.1"]), ()) == "10.1.2.3"


def test_a_trusted_proxy_must_be_an_address_or_a_network() -> None:
    with pytest.raises(ValueError, match="trusted proxy"):
        RateLimitConfig(trusted_proxies=("proxy.example",))
