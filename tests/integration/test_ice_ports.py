"""--ice-udp-ports and --ice-public-address on a real gateway: the answer's candidates are inside the range
(and media flows through them), or carry the announced address."""

from __future__ import annotations

import re
from dataclasses import replace

import aiohttp
import numpy as np
from aiortc import RTCPeerConnection

from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.host_ports import PortRange
from gateway.webrtc.interop.ice import LOOPBACK, IceConfig
from tests.harness.fakes import FakePipeline
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish
from tests.harness.udp_ports import free_udp_block
from tests.harness.waiting import wait_for


def _candidates(sdp: str) -> list[tuple[str, int]]:
    return [(m[0], int(m[1])) for m in re.findall(r"a=candidate:\S+ \d+ udp \d+ (\S+) (\d+) typ host", sdp)]


async def test_media_flows_through_ports_inside_the_range() -> None:
    first = free_udp_block(20)
    ice = IceConfig(host_addresses=LOOPBACK, udp_ports=PortRange(first, first + 19))
    image = np.full((120, 160, 3), 90, np.uint8)
    async with running_gateway(replace(gw_config(), ice=ice), pipeline=FakePipeline()) as gw:
        async with aiohttp.ClientSession() as http:
            client = await publish(http, gw.url, [image])
            try:
                answer = client.pc.remoteDescription.sdp if client.pc.remoteDescription else ""
                found = _candidates(answer)
                assert found and all(a == "127.0.0.1" and first <= p <= first + 19 for a, p in found), found
                assert await wait_for(lambda: len(client.received.ids) >= 10, 20), "no frames back"
            finally:
                await client.close()


async def test_host_candidates_carry_the_announced_address() -> None:
    first = free_udp_block(10)
    ports = PortRange(first, first + 9)
    ice = IceConfig(host_addresses=LOOPBACK, udp_ports=ports, public_address="192.0.2.10")
    pc: RTCPeerConnection = create_peer_connection(ice)
    try:
        pc.addTransceiver("video", direction="sendrecv")
        await pc.setLocalDescription(await pc.createOffer())  # gathers
        sdp = pc.localDescription.sdp if pc.localDescription else ""
        found = _candidates(sdp)
        assert found and all(a == "192.0.2.10" and first <= p <= first + 9 for a, p in found), found
    finally:
        await pc.close()
