"""`--media-dscp`: every socket a gateway peer connection gathers sends with the mark; others stay plain."""

from __future__ import annotations

import socket
from typing import Any

from aiortc import RTCPeerConnection

from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import LOOPBACK, IceConfig


def _ice_sockets(pc: RTCPeerConnection) -> list[socket.socket]:
    sockets = []
    for transceiver in pc.getTransceivers():
        connection: Any = transceiver.receiver.transport.transport.iceGatherer._connection
        for protocol in connection._protocols:
            sockets.append(protocol.transport.get_extra_info("socket"))
    return sockets


async def test_gathered_sockets_carry_the_mark_and_only_on_that_connection() -> None:
    marked = create_peer_connection(IceConfig(host_addresses=LOOPBACK, dscp=34))
    plain = create_peer_connection(IceConfig(host_addresses=LOOPBACK))
    try:
        for pc in (marked, plain):
            pc.addTransceiver("video", direction="sendrecv")
            pc.addTransceiver("audio", direction="recvonly")
            await pc.setLocalDescription(await pc.createOffer())  # gathers
        for pc, tos in ((marked, 0x88), (plain, 0)):
            sockets = _ice_sockets(pc)
            assert sockets, "nothing gathered"
            for sock in sockets:
                assert sock.getsockname()[0] == "127.0.0.1"
                assert sock.getsockopt(socket.IPPROTO_IP, socket.IP_TOS) == tos
        assert "127.0.0.1" in (marked.localDescription.sdp if marked.localDescription else "")
    finally:
        await marked.close()
        await plain.close()
