"""ICE configuration for one peer connection: STUN/TURN servers and which host addresses to gather.

aioice gathers on every interface except loopback; `configure_gathering` wraps, on one connection's ICE
connections only, what it gathers on, and marks the gathered sockets with a DSCP code point when configured.
`rtc_configuration` always passes an explicit server list, so aiortc's default public STUN server is never
contacted unless configured. On an aiortc without the hook, `configure_gathering` refuses with RuntimeError
rather than gather on every interface.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection

from gateway.webrtc import chain, compat
from gateway.webrtc.interop.dscp import mark_socket
from gateway.webrtc.interop.host_ports import PortRange, gather_host_candidates

LOOPBACK: tuple[str, ...] = ("127.0.0.1",)
_PC_MARK = "_livefuse_gathering"
LAYER = "host addresses, ports and DSCP"
GATHERING = "get_component_candidates"  # aioice's (public) gathering, wrapped on one connection
_STOCK_GATHERING = "_livefuse_original_gcc"
# what one connection gathers: host addresses, DSCP, the UDP port range, the announced public address
Wanted = tuple[tuple[str, ...], int | None, PortRange | None, str | None]


@dataclass(frozen=True)
class TurnServer:
    url: str  # turn:host:port?transport=udp
    username: str = ""
    credential: str = ""


@dataclass(frozen=True)
class IceConfig:
    """Servers advertised to clients (and used by the gateway's own peers) and host addresses to gather.

    `host_addresses` empty = aioice's default (every non-loopback interface); ("127.0.0.1",) = loopback only.
    """

    stun: tuple[str, ...] = ()
    turn: tuple[TurnServer, ...] = ()
    host_addresses: tuple[str, ...] = ()
    dscp: int | None = None  # DSCP code point on every media socket (interop.dscp); None = unmarked
    udp_ports: PortRange | None = None  # host candidates bound within this range (interop.host_ports)
    public_address: str | None = None  # host candidates advertised at this address (a 1:1 NAT's public one)

    def __post_init__(self) -> None:
        if self.public_address is not None:
            try:
                ipaddress.ip_address(self.public_address)
            except ValueError:
                raise ValueError(
                    f"ICE public address must be an IP address, got {self.public_address!r}"
                ) from None

    @classmethod
    def loopback_only(cls) -> IceConfig:
        return cls(host_addresses=LOOPBACK)


def ice_servers(config: IceConfig) -> list[RTCIceServer]:
    servers = [RTCIceServer(urls=url) for url in config.stun]
    servers += [
        RTCIceServer(urls=t.url, username=t.username or None, credential=t.credential or None)
        for t in config.turn
    ]
    return servers


def rtc_configuration(config: IceConfig) -> RTCConfiguration:
    """An explicit server list (never aiortc's implicit Google STUN default)."""
    return RTCConfiguration(iceServers=ice_servers(config))


def link_headers(config: IceConfig) -> list[str]:
    """WHIP/WHEP `Link: <url>; rel="ice-server"` values (RFC 9725 section 4.6)."""
    links = [f'<{url}>; rel="ice-server"' for url in config.stun]
    for t in config.turn:
        link = f'<{t.url}>; rel="ice-server"'
        if t.username:
            link += f'; username="{t.username}"; credential="{t.credential}"; credential-type="password"'
        links.append(link)
    return links


def _hook_connection(connection: Any, wanted: Wanted) -> None:
    if getattr(connection, _PC_MARK, None) == wanted:
        return
    only, dscp, ports, announce = wanted

    def make(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def get_component_candidates(
            component: int, addresses: list[str] | None = None, timeout: int = 5
        ) -> Any:
            chosen = list(only or addresses or [])
            if ports is None and announce is None:
                candidates = await original(component=component, addresses=chosen, timeout=timeout)
            else:  # our own host candidates; aioice adds TURN's (no addresses: no host candidates of its own)
                candidates = await gather_host_candidates(
                    connection, component, chosen, ports, announce, timeout
                )
                candidates += await original(component=component, addresses=[], timeout=timeout)
            if dscp is not None:  # every socket gathered (host and relay): media, STUN and DTLS alike
                for sock in compat.gathered_sockets(connection):
                    mark_socket(sock, dscp)
            return candidates

        return get_component_candidates

    # the layer goes on aioice's own method, never on a former one: the last configuration wins
    stock = getattr(connection, _STOCK_GATHERING, None) or getattr(connection, GATHERING)
    setattr(connection, _STOCK_GATHERING, stock)
    setattr(connection, GATHERING, stock)
    chain.wrap(connection, GATHERING, LAYER, make)
    setattr(connection, _PC_MARK, wanted)


def _hook_dtls(dtls_transport: Any, wanted: Wanted) -> None:
    _hook_connection(compat.ice_connection(dtls_transport), wanted)


def configure_gathering(
    pc: RTCPeerConnection,
    addresses: Sequence[str] = (),
    dscp: int | None = None,
    ports: PortRange | None = None,
    announce: str | None = None,
) -> None:
    """Gather host candidates of `pc` on exactly `addresses` (empty: aioice's own choice), bound within
    `ports` and advertised at `announce` (interop.host_ports), and mark every gathered socket with `dscp`
    (None: unmarked). Before `setLocalDescription`. Idempotent."""
    wanted: Wanted = (tuple(addresses), dscp, ports, announce)
    if not chain.on_dtls_transports(pc, _PC_MARK, lambda transport: _hook_dtls(transport, wanted)):
        raise RuntimeError(
            "this aiortc version has no per-connection ICE hook; cannot restrict host addresses or mark DSCP"
        )
