"""Webhooks' pure parts: which monitor events become which webhooks, the retry delays, and the
configuration's one-line refusals."""

from __future__ import annotations

import pytest

from gateway.webhooks.delivery import WebhookConfig, retry_delay_s, webhook_event


def test_monitor_events_map_to_webhook_events() -> None:
    assert webhook_event("session_open", {}) == "session.started"
    assert webhook_event("session_close", {}) == "session.ended"
    assert webhook_event("drops", {"session_id": "s"}) == "session.degraded"
    assert webhook_event("degradation", {"from": 0, "to": 1}) == "degraded"
    assert webhook_event("egress", {"state": "failed"}) == "egress.failed"
    assert webhook_event("egress", {"state": "live"}) is None
    assert webhook_event("reject", {}) is None


def test_retry_delays_double_up_to_the_cap() -> None:
    assert [retry_delay_s(n, 3.0) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_bad_configuration_is_refused_in_one_line() -> None:
    for kwargs, words in (
        ({"urls": ("ftp://x/hook",), "secret": "s"}, "absolute"),
        ({"urls": ("http://x/hook",)}, "secret"),
        ({"urls": ("http://x/hook",), "secret": "s", "events": ("session.begun",)}, "unknown"),
        ({"max_attempts": 0}, "attempts"),
    ):
        with pytest.raises(ValueError, match=words):
            WebhookConfig(**kwargs)  # type: ignore[arg-type]
