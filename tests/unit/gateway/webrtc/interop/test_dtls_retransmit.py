"""The early DTLS resend policy, pure: its schedule, what a flight is, when a resend is void."""

from __future__ import annotations

import pytest

from gateway.webrtc.interop.dtls_retransmit import FlightResends, RetransmitSchedule


def test_the_schedule_doubles_from_its_first_wait() -> None:
    assert RetransmitSchedule(first_s=0.1, factor=2.0, count=3).waits() == pytest.approx((0.1, 0.2, 0.4))
    assert RetransmitSchedule(count=0).waits() == ()
    # the default ends before OpenSSL's own timer (1 s after the flight) would resend
    assert sum(RetransmitSchedule().waits()) < 1.0


@pytest.mark.parametrize("bad", [{"first_s": 0.0}, {"factor": 0.5}, {"count": -1}])
def test_a_schedule_that_cannot_work_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="retransmit schedule"):
        RetransmitSchedule(**bad)  # type: ignore[arg-type]


def test_only_the_first_flight_is_resent_and_only_until_the_peer_speaks() -> None:
    flights = FlightResends()
    assert flights.flight() == ()  # nothing written yet
    assert flights.sent(b"") is False  # nothing written: no flight
    assert flights.sent(b"hello") is True  # the first write begins the flight (its schedule starts)
    assert flights.sent(b"hello, part 2") is False  # same flight, a second datagram
    assert flights.flight() == (b"hello", b"hello, part 2")
    flights.heard()  # the peer's endpoint is up: its own timers cover what follows
    assert flights.flight() == ()
    assert flights.sent(b"key exchange, finished") is False  # a later flight is never tracked
    assert flights.flight() == ()
