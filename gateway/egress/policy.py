"""What an egress does after each attempt: pure, synchronous, tested without a network.

RFC 9725 leaves retries to the client; the rule here: a server error (5xx, 408, 429), a network error, a
timeout or a lost connection is retried after an exponential backoff (capped, `Retry-After` honoured up to
the cap); any other refusal (401, 403, 404, 415, 422, ...) is the operator's mistake and fails at once, as
does the attempt after `max_attempts` failures in a row. A push that reached `live` starts counting again.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class EgressState(enum.StrEnum):
    CONNECTING = "connecting"  # OPTIONS/POST sent, or ICE/DTLS in progress
    LIVE = "live"  # media flows to the endpoint
    RETRYING = "retrying"  # waiting out a backoff before the next attempt
    FAILED = "failed"  # given up: refused, or too many failures in a row
    STOPPED = "stopped"  # ended on purpose (DELETE, the session ended, shutdown)


STATES: tuple[str, ...] = tuple(s.value for s in EgressState)


@dataclass(frozen=True)
class RetryConfig:
    first_delay_s: float = 1.0
    max_delay_s: float = 30.0
    factor: float = 2.0
    max_attempts: int = 6  # failures in a row before `failed`; 0 = retry as long as the session lives

    def __post_init__(self) -> None:
        if self.first_delay_s <= 0 or self.max_delay_s < self.first_delay_s or self.factor < 1:
            raise ValueError("egress retry: first delay > 0, max delay >= first delay, factor >= 1")
        if self.max_attempts < 0:
            raise ValueError("egress retry: max attempts must be >= 0")


@dataclass(frozen=True)
class Failure:
    """One failed attempt: `status` is the endpoint's HTTP status (None: network, timeout, lost link)."""

    reason: str
    status: int | None = None
    retry_after_s: float | None = None


@dataclass(frozen=True)
class Step:
    state: EgressState  # RETRYING or FAILED
    delay_s: float = 0.0


def retryable(status: int | None) -> bool:
    return status is None or status >= 500 or status in (408, 429)


def after_failure(config: RetryConfig, failure: Failure, failures_in_a_row: int) -> Step:
    """The step after the `failures_in_a_row`-th consecutive failure (1 for the first)."""
    if not retryable(failure.status):
        return Step(EgressState.FAILED)
    if config.max_attempts and failures_in_a_row >= config.max_attempts:
        return Step(EgressState.FAILED)
    delay = min(config.max_delay_s, config.first_delay_s * config.factor ** (failures_in_a_row - 1))
    if failure.retry_after_s is not None:
        delay = min(config.max_delay_s, max(delay, failure.retry_after_s))
    return Step(EgressState.RETRYING, delay)
