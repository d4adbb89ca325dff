"""Early DTLS retransmits: a flight the peer has not answered goes again after 50 ms, then 100, 200, 400.

aiortc leaves retransmission to OpenSSL's DTLS timer, whose first timeout is 1 s (pyOpenSSL exposes no way to
set it: `DTLS_set_timer_cb` is not in its bindings). The gateway answers `a=setup:active`, so it sends its
ClientHello the moment its own ICE side is ready; a peer that creates its DTLS endpoint only after its own
ICE reports connected drops that datagram. **FFmpeg's WHIP muxer** (the one inside PyAV's wheels) is such a
peer: its DTLS came up about 1.1 s after ICE in every run of the interop matrix, the ClientHello dropped and
OpenSSL's timer resending it after its full second. Browsers' stacks start far sooner and double
(libwebrtc sets BoringSSL's initial DTLS timeout from the ICE round trip, never under 50 ms).

Here each flight OpenSSL writes (the datagrams it hands over between two datagrams from the peer) is kept,
and while the peer says nothing it is sent again, byte for byte, on `RetransmitSchedule`. A copy is what a
lost flight needs: a peer that never saw it takes it; one that did drops the copy as a replayed record
(same epoch and sequence number). OpenSSL's own timer runs on untouched and takes over where the schedule
ends. The first datagram from the peer ends the flight's resends; the next flight OpenSSL writes starts its
own schedule. Pure policy (`FlightResends`) apart from the driver on the handshake (`retransmit_flights`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.webrtc import compat
from gateway.webrtc.patches import dtls_transport

logger = logging.getLogger(__name__)

LAYER = "DTLS retransmit"
RETRANSMIT_MARK = "_livefuse_dtls_retransmit"  # the connection's hook; each transport's FlightResends


@dataclass(frozen=True)
class RetransmitSchedule:
    """When an unanswered flight goes again: `first_s` after it was written, then each wait `factor` times
    the last, at most `count` times (50, 100, 200, 400 ms: 0.05, 0.15, 0.35, 0.75 s after the flight;
    OpenSSL's own timer resends at 1 s)."""

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
    """One handshake's flights: what OpenSSL wrote since the peer last spoke, and how many resends went out.
    Pure: `sent` / `heard` tell it what crossed the wire, `flight` is what a resend sends."""

    datagrams: list[bytes] = field(default_factory=list)
    generation: int = 0  # bumps when the peer speaks: a resend of an older flight is void
    resends: int = 0  # datagram resends sent, all flights
    answered: bool = True  # the peer spoke after the current flight began (or no flight yet)

    def sent(self, data: bytes) -> bool:
        """OpenSSL wrote `data`; True when it begins a new flight (its resend schedule starts now)."""
        if not data:
            return False
        starts = self.answered
        if starts:
            self.datagrams = []
            self.answered = False
        self.datagrams.append(bytes(data))
        return starts

    def heard(self) -> None:
        """A datagram from the peer: the current flight is answered (or is being answered)."""
        self.answered = True
        self.generation += 1

    def flight(self, generation: int) -> tuple[bytes, ...]:
        """What to send again for the flight of `generation`: nothing once the peer has spoken since."""
        if generation != self.generation or self.answered:
            return ()
        return tuple(self.datagrams)


def _driver(
    transport: Any, schedule: RetransmitSchedule, resends: FlightResends
) -> Callable[[Callable[[], Awaitable[None]]], Callable[[], Awaitable[None]]]:
    def make(original_handshake: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        async def do_handshake() -> None:
            connection = getattr(transport, compat.DTLS_SSL, None)
            send: Callable[[bytes], Awaitable[None]] | None = getattr(
                transport.transport, compat.ICE_TRANSPORT_SEND, None
            )
            if connection is None or send is None:  # not the aiortc this was written for: its timer alone
                await original_handshake()
                return
            read, write = connection.bio_read, connection.bio_write
            timers: set[asyncio.Task[None]] = set()

            async def resend(generation: int) -> None:
                assert send is not None
                for wait in schedule.waits():
                    await asyncio.sleep(wait)
                    flight = resends.flight(generation)
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
                    timer = asyncio.ensure_future(resend(resends.generation))
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
    """Resend `transport`'s unanswered handshake flights on `schedule` (the module docstring). Idempotent;
    what it sent is counted in the returned `FlightResends`."""
    existing = getattr(transport, RETRANSMIT_MARK, None)
    if isinstance(existing, FlightResends):
        return existing
    resends = FlightResends()
    dtls_transport.wrap_do_handshake(transport, LAYER, _driver(transport, schedule, resends))
    setattr(transport, RETRANSMIT_MARK, resends)
    return resends


def flight_resends(transport: Any) -> FlightResends | None:
    """What `retransmit_flights` counted on `transport` (None where it was not installed)."""
    found = getattr(transport, RETRANSMIT_MARK, None)
    return found if isinstance(found, FlightResends) else None
