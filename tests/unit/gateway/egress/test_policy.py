"""Egress retry policy: what is retried, how long the backoff is, which settings are refused."""

from __future__ import annotations

import pytest

from gateway.egress.policy import EgressState, Failure, RetryConfig, after_failure, retryable


def test_server_and_network_errors_are_retried_with_a_capped_exponential_backoff() -> None:
    config = RetryConfig(first_delay_s=1.0, max_delay_s=5.0, factor=2.0, max_attempts=0)
    delays = [after_failure(config, Failure("boom", 503), n).delay_s for n in range(1, 6)]
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0]
    for status in (None, 500, 502, 408, 429):
        assert after_failure(config, Failure("x", status), 1).state is EgressState.RETRYING


def test_client_errors_fail_at_once_and_attempts_are_bounded() -> None:
    config = RetryConfig(max_attempts=3)
    for status in (400, 401, 403, 404, 415, 422):
        assert not retryable(status)
        assert after_failure(config, Failure("no", status), 1).state is EgressState.FAILED
    assert after_failure(config, Failure("down"), 2).state is EgressState.RETRYING
    assert after_failure(config, Failure("down"), 3).state is EgressState.FAILED


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    config = RetryConfig(first_delay_s=1.0, max_delay_s=10.0)
    assert after_failure(config, Failure("busy", 503, retry_after_s=4.0), 1).delay_s == 4.0
    assert after_failure(config, Failure("busy", 503, retry_after_s=60.0), 1).delay_s == 10.0


def test_bad_retry_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        RetryConfig(first_delay_s=0)
    with pytest.raises(ValueError):
        RetryConfig(first_delay_s=5, max_delay_s=1)
