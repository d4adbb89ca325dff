"""ICE configuration for one peer connection: STUN/TURN servers and which host addresses to gather.

Why per connection: aioice gathers host candidates from every interface EXCEPT loopback (its module-level
`get_host_addresses` skips 127.0.0.1), so a test or a load generator that must keep media on 127.0.0.1 has to
choose the addresses itself. `restrict_host_addresses(pc, ("127.0.0.1",))` wraps, on that one connection's ICE
connections only, aioice's `Connection.get_component_candidates` so it gathers exactly the given
addresses. Other connections in the process are untouched (no global monkeypatch). The same hook marks the
gathered sockets with a DSCP code point when one is configured (`configure_gathering`, gateway.rtc.dscp).

Also: aiortc falls back to Google's public STUN server when `iceServers` is None; `rtc_configuration` always
passes an explicit (possibly empty) list, so nothing is contacted unless configured.

Version guard: the hook relies on aiortc's private `_RTCPeerConnection__createDtlsTransport` and the ICE
gatherer's `_connection` (aiortc 1.14-1.16, aioice 0.9-0.13). When they are missing, `configure_gathering`
raises `RuntimeError` instead of silently gathering on every interface.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection

from gateway.rtc.dscp import mark_socket
from gateway.rtc.host_ports import PortRange, gather_host_candidates
from gateway.rtc.receive import apply_low_latency_receive

LOOPBACK: tuple[str, ...] = ("127.0.0.1",)
_PC_DTLS_FACTORY = "_RTCPeerConnection__createDtlsTransport"
_PC_MARK = "_livefuse_gathering"


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
    dscp: int | None = None  # DSCP code point on every media socket (gateway.rtc.dscp); None = unmarked
    udp_ports: PortRange | None = None  # host candidates bound within this range (gateway.rtc.host_ports)
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
    for protocol in getattr(connection, "_protocols", ()):
        transport = getattr(protocol, "transport", None)
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is not None:
            mark_socket(sock, dscp)


Wanted = tuple[tuple[str, ...], int | None, PortRange | None, str | None]  # addresses, dscp, ports, announce


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
    connection = dtls_transport.transport.iceGatherer._connection
    _hook_connection(connection, wanted)


def configure_gathering(
    pc: RTCPeerConnection,
    addresses: Sequence[str] = (),
    dscp: int | None = None,
    ports: PortRange | None = None,
    announce: str | None = None,
) -> None:
    """Gather host candidates of `pc` on exactly `addresses` (empty: aioice's own choice), bound within
    `ports` and advertised at `announce` (gateway.rtc.host_ports), and mark every gathered socket with `dscp`
    (None: unmarked). Before `setLocalDescription`. Idempotent."""
    wanted: Wanted = (tuple(addresses), dscp, ports, announce)
    if not hasattr(pc, _PC_DTLS_FACTORY):
        raise RuntimeError(
            "this aiortc version has no per-connection ICE hook; cannot restrict host addresses or mark DSCP"
        )
    for transceiver in pc.getTransceivers():
        _hook_dtls(transceiver.receiver.transport, wanted)
    sctp = pc.sctp
    if sctp is not None:
        _hook_dtls(sctp.transport, wanted)
    if getattr(pc, _PC_MARK, None) == wanted:
        return
    original = getattr(pc, "_livefuse_original_dtls", None) or getattr(pc, _PC_DTLS_FACTORY)

    def create_dtls_transport() -> Any:
        transport = original()
        _hook_dtls(transport, wanted)
        return transport

    pc._livefuse_original_dtls = original  # type: ignore[attr-defined]
    setattr(pc, _PC_DTLS_FACTORY, create_dtls_transport)
    setattr(pc, _PC_MARK, wanted)


def restrict_host_addresses(pc: RTCPeerConnection, addresses: Sequence[str]) -> None:
    """Gather host candidates of `pc` on exactly `addresses` (before `setLocalDescription`). Idempotent."""
    configure_gathering(pc, addresses)


def create_peer_connection(config: IceConfig, *, low_latency_receive: bool = True) -> RTCPeerConnection:
    """A peer connection with explicit ICE servers, the configured host addresses, marker-release receive."""
    pc = RTCPeerConnection(configuration=rtc_configuration(config))
    if config.host_addresses or config.dscp is not None or config.udp_ports or config.public_address:
        configure_gathering(pc, config.host_addresses, config.dscp, config.udp_ports, config.public_address)
    if low_latency_receive:
        apply_low_latency_receive(pc)
    return pc
