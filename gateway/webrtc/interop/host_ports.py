"""Host candidates on a fixed UDP port range, announced at a public address (NAT 1:1, hostNetwork pods).

Why: aioice binds every host candidate on an ephemeral port of the machine's own addresses. Behind a
firewall only a known range can be opened (`--ice-udp-ports 40000-40999`), and a node or VM behind a 1:1
NAT must advertise the address clients reach, not its private one (`--ice-public-address 203.0.113.7`),
where a STUN round trip per session would learn the same thing. `gather_host_candidates` does what
aioice's `Connection.get_component_candidates` does for host candidates, with those two differences;
interop.ice calls it from its per-connection gathering hook and lets aioice add STUN and TURN candidates.
Reaches into aioice's `Connection._protocols` and `StunProtocol` (aioice 0.9-0.13, as interop.ice).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import random
import socket
from dataclasses import dataclass
from typing import Any

from aioice.candidate import Candidate, candidate_foundation, candidate_priority
from aioice.ice import StunProtocol, server_reflexive_candidate
from aioice.turn import UDP_SOCKET_BUFFER_SIZE


@dataclass(frozen=True)
class PortRange:
    first: int
    last: int

    def __post_init__(self) -> None:
        if not 1024 <= self.first <= self.last <= 65535:
            raise ValueError(f"ICE UDP ports must be a range within 1024-65535, got {self.first}-{self.last}")

    def __len__(self) -> int:
        return self.last - self.first + 1


def parse_port_range(text: str) -> PortRange:
    """`40000-40999` (or one port, `40000`)."""
    first, _, last = str(text).strip().partition("-")
    try:
        return PortRange(int(first), int(last or first))
    except ValueError as exc:
        if "within" in str(exc):
            raise
        raise ValueError(f"ICE UDP ports take FIRST-LAST, e.g. 40000-40999, got {text!r}") from None


def bind_in_range(address: str, ports: PortRange, rng: random.Random | None = None) -> socket.socket:
    """A UDP socket bound to `address` on a free port of `ports` (tried from a random one on, once each)."""
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    start = (rng or random).randrange(len(ports))
    for i in range(len(ports)):
        port = ports.first + (start + i) % len(ports)
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.bind((address, port))
        except OSError as exc:
            sock.close()
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                continue
            raise
        return sock
    raise OSError(errno.EADDRINUSE, f"no free UDP port in {ports.first}-{ports.last} on {address}")


async def gather_host_candidates(
    connection: Any,
    component: int,
    addresses: list[str],
    ports: PortRange | None,
    announce: str | None,
    timeout: float = 5.0,
) -> list[Candidate]:
    """Host candidates of `connection` (an aioice Connection) on `addresses`, bound within `ports` (any port
    when None) and advertised at `announce` (their own address when None); with STUN configured and nothing
    announced, also their server-reflexive candidates. The protocols join the connection's own."""
    loop = asyncio.get_running_loop()
    candidates: list[Candidate] = []
    protocols: list[Any] = []
    for address in addresses:
        try:
            if ports is None:
                transport, protocol = await loop.create_datagram_endpoint(
                    lambda: StunProtocol(connection), local_addr=(address, 0)
                )
            else:
                sock = bind_in_range(address, ports)
                transport, protocol = await loop.create_datagram_endpoint(
                    lambda: StunProtocol(connection), sock=sock
                )
        except OSError:
            continue  # aioice skips an address it cannot bind, too
        bound = transport.get_extra_info("socket")
        if bound is not None:
            bound.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UDP_SOCKET_BUFFER_SIZE)
        host, port = transport.get_extra_info("sockname")[:2]
        shown = announce or host
        protocol.local_candidate = Candidate(
            foundation=candidate_foundation("host", "udp", shown),
            component=component,
            transport="udp",
            priority=candidate_priority(component, "host"),
            host=shown,
            port=port,
            type="host",
        )
        protocols.append(protocol)
        candidates.append(protocol.local_candidate)
    connection._protocols += protocols
    stun_server = getattr(connection, "stun_server", None)
    if stun_server and announce is None:
        tasks = [
            asyncio.ensure_future(server_reflexive_candidate(p, stun_server))
            for p in protocols
            if ipaddress.ip_address(p.local_candidate.host).version == 4
        ]
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=timeout)
            candidates += [t.result()[0] for t in done if t.exception() is None]
            for task in pending:
                task.cancel()
    return candidates
