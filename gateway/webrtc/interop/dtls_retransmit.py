"""Early DTLS retransmits: a first flight the peer has not answered goes again after 50, 100, 200, 400 ms.

aiortc leaves retransmission to OpenSSL's DTLS timer, whose first timeout is 1 s (pyOpenSSL cannot set it:
`DTLS_set_timer_cb` is not in its bindings). The gateway answers `a=setup:active`, so it sends its
ClientHello the moment its own ICE side is ready; a peer that creates its DTLS endpoint only after its own
ICE reports connected drops that datagram and waits a second for OpenSSL's resend. **FFmpeg's WHIP muxer**
(the one inside PyAV's wheels) is such a peer. Here the first flight OpenSSL writes (our ClientHello, as
DTLS client) is kept and sent again byte for byte on `RetransmitSchedule` until the peer first speaks; later
flights are left alone (`retransmit_flights` says why). Pure policy (`FlightResends`) apart from the driver
on the handshake (`retransmit_flights`). Figures: docs/BENCHMARKS.md, the way on air.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.webrtc import chain, compat

logger = logging.getLogger(__name__)

LAYER = "DTLS retransmit"
RETRANSMIT_MARK = "_livefuse_dtls_retransmit"  # the connection's hook; each transport's FlightResends


@dataclass(frozen=True)
class RetransmitSchedule:
    """When the unanswered first flight goes again: `first_s` after it was written, then each wait `factor`
    times the last, at most `count` times (50, 100, 200, 400 ms: 0.05, 0.15, 0.35, 0.75 s after the flight;
    OpenSSL's own timer resends at 1 s). Browsers' stacks start far sooner and double: libwebrtc sets
    BoringSSL's initial DTLS timeout from the ICE round trip, never under 50 ms."""

    first_s: float = 0.05
    factor: float = 2.0
    count: int = 4

    def __post_init__(self) -> None:
        if self.first_s <= 0 or self.factor < 1 or self.count < 0:
            raise ValueError("a DTLS retransmit schedule needs first_s > 0, factor >= 1, count >= 0")

    def waits(self) -> tuple[float, ...]:
        """The wait before each resend, in order."""
        return tuple(self.first_s * self.factor**i for i in range(self.count))


@dataclass
class FlightResends:
    """One handshake's first flight: what OpenSSL wrote before the peer first spoke, and how many resends
    went out. Pure: `sent` / `heard` tell it what crossed the wire, `flight` is what a resend sends."""

    datagrams: list[bytes] = field(default_factory=list)
    resends: int = 0  # datagrams sent again
    heard_peer: bool = False  # the peer has spoken: nothing is resent any more

    def sent(self, data: bytes) -> bool:
        """OpenSSL wrote `data`; True when it begins the first flight (its resend schedule starts now)."""
        if not data or self.heard_peer:
            return False
        self.datagrams.append(bytes(data))
        return len(self.datagrams) == 1

    def heard(self) -> None:
        """A datagram from the peer: its endpoint is up; the first flight is answered or being answered."""
        self.heard_peer = True

    def flight(self) -> tuple[bytes, ...]:
        """What to send again now: the first flight, until the peer has spoken."""
        return () if self.heard_peer else tuple(self.datagrams)


def _driver(
    transport: Any, schedule: RetransmitSchedule, resends: FlightResends
) -> Callable[[Callable[[], Awaitable[None]]], Callable[[], Awaitable[None]]]:
    def make(original_handshake: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        async def do_handshake() -> None:
            connection = compat.dtls_connection(transport)
            send = compat.ice_send(transport.transport)
            if connection is None or send is None:  # not the aiortc this was written for: its timer alone
                await original_handshake()
                return
            read, write = connection.bio_read, connection.bio_write
            timers: set[asyncio.Task[None]] = set()

            async def resend() -> None:
                assert send is not None
                for wait in schedule.waits():
                    await asyncio.sleep(wait)
                    flight = resends.flight()
                    if not flight:
                        return
                    try:
                        for datagram in flight:
                            await send(datagram)
                            resends.resends += 1
                    except ConnectionError:  # ICE went away: the handshake ends on its own
                        return
                    logger.debug("%s: DTLS flight resent (%d datagrams)", LAYER, len(flight))

            def bio_read(size: int) -> bytes:
                data: bytes = read(size)
                if resends.sent(data):
                    timer = asyncio.ensure_future(resend())
                    timers.add(timer)
                    timer.add_done_callback(timers.discard)
                return data

            def bio_write(data: bytes) -> int:
                resends.heard()
                result: int = write(data)
                return result

            connection.bio_read, connection.bio_write = bio_read, bio_write
            try:
                await original_handshake()
            finally:
                connection.bio_read, connection.bio_write = read, write
                for timer in list(timers):
                    timer.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await timer

        return do_handshake

    return make


def retransmit_flights(transport: Any, schedule: RetransmitSchedule) -> FlightResends:
    """Resend `transport`'s first handshake flight on `schedule` while the peer says nothing (the module
    docstring). Idempotent; what it sent is counted in the returned `FlightResends`.

    The first flight is the datagrams OpenSSL hands over before the peer has said anything. A copy is what a
    dropped flight needs: a peer that never saw it takes it; one that did sees a duplicate ClientHello, which
    DTLS answers by resending its own flight. The first datagram from the peer ends the resends for good:
    its endpoint is up, and a later loss is for both sides' own timers (OpenSSL's runs on untouched). Later
    flights are left alone on purpose: with them resent 50 ms on, FFmpeg's WHIP muxer (audio and video) got
    copies of our final flight after its handshake had ended and stalled (media a second late, then the
    muxer hung)."""
    existing = getattr(transport, RETRANSMIT_MARK, None)
    if isinstance(existing, FlightResends):
        return existing
    resends = FlightResends()
    chain.wrap(transport, compat.DTLS_DO_HANDSHAKE, LAYER, _driver(transport, schedule, resends))
    setattr(transport, RETRANSMIT_MARK, resends)
    return resends


def flight_resends(transport: Any) -> FlightResends | None:
    """What `retransmit_flights` counted on `transport` (None where it was not installed)."""
    found = getattr(transport, RETRANSMIT_MARK, None)
    return found if isinstance(found, FlightResends) else None
