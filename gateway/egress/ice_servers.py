"""The ICE servers an endpoint offers (`Link: <turn:...>; rel="ice-server"`) pass the allow-list too.

An allowed endpoint would otherwise steer the gateway anywhere: aioice opens UDP or TCP to every STUN/TURN
server it is given and sends it a Binding or an Allocate. So each offered server is judged like the endpoint
(gateway.egress.destinations): its host must be the --egress-url host or one an --egress-allow entry names
(any port: TURN listens beside the WHIP port), under the same address rules; under `*`, a public address. A
name is resolved here, every address checked, and the server handed to aiortc as the checked IPv4 address,
so ICE never resolves it again (DNS rebinding); `turns:` keeps its name for the TLS certificate check. A
refused server is left out, not fatal: the push goes on with the candidates it has. WHIP's Link header is
the one place an endpoint names them (how other servers get theirs: docs/EGRESS.md).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import replace

from aiortc import RTCIceServer

from gateway.egress.destinations import AllowList, DestinationRefused, host_of

logger = logging.getLogger(__name__)

# aiortc's own grammar for stun:/turn: URLs (aiortc.rtcicetransport): no IPv6 literals
_ICE_URL = re.compile(
    r"^(?P<scheme>stuns?|turns?):(?P<host>[^?:]+)(?::(?P<port>[0-9]+))?(?:\?transport=(?P<transport>\w+))?$"
)
Resolve = Callable[[str, int], Awaitable[list[str]]]


async def resolve_stream(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


class IceServerCheck:
    """`await check(servers)`: the servers that pass, each as it will be used."""

    def __init__(
        self, allow: AllowList, trusted_hosts: frozenset[str] = frozenset(), resolve: Resolve = resolve_stream
    ) -> None:
        self._allow = allow
        self._trusted = trusted_hosts
        self._resolve = resolve

    async def __call__(self, servers: tuple[RTCIceServer, ...]) -> tuple[RTCIceServer, ...]:
        kept = []
        for server in servers:
            try:
                kept.append(await self._one(server))
            except DestinationRefused as exc:
                logger.warning("egress ICE server left out: %s", exc)
        return tuple(kept)

    async def _one(self, server: RTCIceServer) -> RTCIceServer:
        url = server.urls if isinstance(server.urls, str) else ""
        match = _ICE_URL.match(url)
        if match is None:
            raise DestinationRefused("an ICE server URL that is not stun:/turn:host[:port]")
        scheme, raw_host = match["scheme"], match["host"]
        port = int(match["port"] or (5349 if scheme.endswith("s") else 3478))
        host, literal = host_of(raw_host)
        if host not in self._trusted and not self._allow.may_reach(host):  # asked of no resolver
            raise DestinationRefused(f"{scheme}:{host}:{port}: no --egress-allow entry names {host}")
        addresses = [str(literal)] if literal is not None else await self._addresses(host, port)
        if host not in self._trusted:  # the endpoint's own host passes by the entry that took the endpoint
            for address in addresses:
                if not self._allow.ice_allows(host, address):
                    raise DestinationRefused(
                        f"{scheme}:{host}:{port} ({address}) is not the endpoint's host and no "
                        "--egress-allow entry names it"
                    )
        if literal is not None or scheme == "turns":
            return server
        v4 = [a for a in addresses if isinstance(ipaddress.ip_address(a), ipaddress.IPv4Address)]
        if not v4:
            raise DestinationRefused(f"{scheme}:{host}:{port} has no IPv4 address (aiortc takes no other)")
        transport = f"?transport={match['transport']}" if match["transport"] else ""
        return replace(server, urls=f"{scheme}:{v4[0]}:{port}{transport}")

    async def _addresses(self, host: str, port: int) -> list[str]:
        try:
            addresses = await self._resolve(host, port)
        except OSError as exc:
            raise DestinationRefused(f"ICE server {host} does not resolve ({exc})") from None
        if not addresses:
            raise DestinationRefused(f"ICE server {host} resolves to nothing")
        return [a.split("%")[0] for a in addresses]
