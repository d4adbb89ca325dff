"""A DTLS peer that drops the gateway's first ClientHello, as a stack that creates its DTLS endpoint only
after its own ICE reports connected does (FFmpeg's WHIP muxer): the gateway's early resend of that flight,
not OpenSSL's 1 s timer, gets the handshake going.

What tells them apart is on the wire, not on a clock: the early resend is the first ClientHello byte for
byte, its record sequence number included, while OpenSSL's own retransmission is a new record with the next
sequence number. A stalled event loop cannot reorder them either: the resend's timer falls due long before
OpenSSL's, and asyncio runs due timers in deadline order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiortc import RTCPeerConnection, RTCSessionDescription

from gateway.webrtc import compat
from gateway.webrtc.install import create_peer_connection, open_peer_connection
from gateway.webrtc.interop.dtls_retransmit import RetransmitSchedule, flight_resends
from tests.harness.gateway import LOOPBACK

HANDSHAKE, CLIENT_HELLO = 22, 1


@dataclass
class Hellos:
    """The ClientHello records a peer's ICE transport delivered: (epoch, record sequence number)."""

    seen: list[tuple[int, int]] = field(default_factory=list)
    dropped: list[tuple[int, int]] = field(default_factory=list)


def client_hello(datagram: bytes) -> tuple[int, int] | None:
    """(epoch, record sequence number) when `datagram` opens with a DTLS ClientHello record."""
    if len(datagram) < 14 or datagram[0] != HANDSHAKE or datagram[13] != CLIENT_HELLO:
        return None
    return int.from_bytes(datagram[3:5], "big"), int.from_bytes(datagram[5:11], "big")


def drop_first_client_hello(peer: RTCPeerConnection) -> Hellos:
    """The peer's DTLS never sees the first ClientHello that reaches it (its endpoint was not up yet)."""
    hellos = Hellos()
    ice = peer.getTransceivers()[0].receiver.transport.transport
    receive: Callable[[], Awaitable[bytes]] = ice._recv

    async def recv() -> bytes:
        while True:
            data = await receive()
            found = client_hello(data)
            if found is None:
                return data
            if not hellos.dropped:
                hellos.dropped.append(found)
                continue
            hellos.seen.append(found)
            return data

    ice._recv = recv
    return hellos


async def connect(gateway: RTCPeerConnection, peer: RTCPeerConnection, timeout_s: float = 20.0) -> None:
    both = asyncio.Event()

    def check() -> None:
        if gateway.connectionState == "connected" and peer.connectionState == "connected":
            both.set()

    gateway.on("connectionstatechange", check)
    peer.on("connectionstatechange", check)
    await asyncio.wait_for(both.wait(), timeout_s)


async def test_a_dropped_client_hello_is_resent_early_not_by_the_one_second_timer() -> None:
    schedule = RetransmitSchedule(first_s=0.1, factor=2.0, count=3)
    peer = create_peer_connection(LOOPBACK)
    peer.addTransceiver("video", direction="sendrecv")
    gateway, _ = open_peer_connection(LOOPBACK, "dropped hello", dtls_retransmit=schedule)
    try:
        await peer.setLocalDescription(await peer.createOffer())
        hellos = drop_first_client_hello(peer)
        await gateway.setRemoteDescription(peer.localDescription)
        await gateway.setLocalDescription(await gateway.createAnswer())
        assert "a=setup:active" in gateway.localDescription.sdp  # the gateway sends the ClientHello
        await peer.setRemoteDescription(
            RTCSessionDescription(sdp=gateway.localDescription.sdp, type="answer")
        )
        await connect(gateway, peer)

        assert len(hellos.dropped) == 1
        # the ClientHello the peer took is a copy of the dropped one: the gateway's resend, not OpenSSL's
        # own retransmission (a new record, the next sequence number)
        assert hellos.seen and hellos.seen[0] == hellos.dropped[0]
        transport = gateway.getTransceivers()[0].receiver.transport
        resends = flight_resends(transport)
        assert resends is not None and 1 <= resends.resends
        assert compat.dtls_role(transport) == "client"
    finally:
        await gateway.close()
        await peer.close()
