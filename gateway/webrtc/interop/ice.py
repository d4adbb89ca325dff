"""ICE configuration for one peer connection: STUN/TURN servers and which host addresses to gather.

aioice gathers on every interface except loopback; `configure_gathering` wraps, on one connection's ICE
connections only, what it gathers on, and marks the gathered sockets with a DSCP code point when configured.
`rtc_configuration` always passes an explicit server list, so aiortc's default public STUN server is never
contacted unless configured. On an aiortc without the hook, `configure_gathering` refuses with RuntimeError
rather than gather on every interface.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection

from gateway.webrtc import compat
from gateway.webrtc.interop.dscp import mark_socket
from gateway.webrtc.interop.host_ports import PortRange, gather_host_candidates
from gateway.webrtc.transports import on_dtls_transports

LOOPBACK: tuple[str, ...] = ("127.0.0.1",)
_PC_MARK = "_livefuse_gathering"
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

    @property
    def is_loopback_only(self) -> bool:
        return self.host_addresses == LOOPBACK


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


def _mark_connection_sockets(connection: Any, dscp: int) -> None:
    """DSCP on every socket `connection` gathered (host and relay): media, STUN and DTLS alike."""
    for protocol in getattr(connection, compat.CONNECTION_PROTOCOLS, ()):
        transport = getattr(protocol, "transport", None)
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is not None:
            mark_socket(sock, dscp)


def _hook_connection(connection: Any, wanted: Wanted) -> None:
    if getattr(connection, _PC_MARK, None) == wanted:
        return
    only, dscp, ports, announce = wanted
    original = getattr(connection, "_livefuse_original_gcc", None) or connection.get_component_candidates

    async def get_component_candidates(
        component: int, addresses: list[str] | None = None, timeout: int = 5
    ) -> Any:
        chosen = list(only or addresses or [])
        if ports is None and announce is None:
            candidates = await original(component=component, addresses=chosen, timeout=timeout)
        else:  # our own host candidates; aioice adds TURN's (no addresses: no host candidates of its own)
            candidates = await gather_host_candidates(connection, component, chosen, ports, announce, timeout)
            candidates += await original(component=component, addresses=[], timeout=timeout)
        if dscp is not None:
            _mark_connection_sockets(connection, dscp)
        return candidates

    connection._livefuse_original_gcc = original
    connection.get_component_candidates = get_component_candidates
    setattr(connection, _PC_MARK, wanted)


def _hook_dtls(dtls_transport: Any, wanted: Wanted) -> None:
    connection = getattr(dtls_transport.transport.iceGatherer, compat.GATHERER_CONNECTION)
    _hook_connection(connection, wanted)


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
    if not on_dtls_transports(pc, _PC_MARK, lambda transport: _hook_dtls(transport, wanted)):
        raise RuntimeError(
            "this aiortc version has no per-connection ICE hook; cannot restrict host addresses or mark DSCP"
        )


def restrict_host_addresses(pc: RTCPeerConnection, addresses: Sequence[str]) -> None:
    """Gather host candidates of `pc` on exactly `addresses` (before `setLocalDescription`). Idempotent."""
    configure_gathering(pc, addresses)
