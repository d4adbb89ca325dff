"""`--ice-public-address auto`: this machine's external address, asked of a STUN server once at start-up.

A gateway pod on hostNetwork, or a VM behind a 1:1 NAT, knows only its private address; clients need the
public one in its host candidates, and one Deployment cannot give each pod its own `--ice-public-address`.
So each gateway asks the first `--stun` server which address its request came from (an RFC 8489 Binding
request, its XOR-MAPPED-ADDRESS), as LiveKit's `rtc.use_external_ip` does. Only the address is used: the
port a NAT maps differs per socket, and the media sockets are others. A server that does not answer stops
the start in one line (`discover_public_address`): a wrong address would accept sessions no client reaches.
The Binding exchange is written out here (a 20-byte request, one attribute read back): it needs nothing of
aioice's connection machinery, and the tests check it against aioice's own STUN message code.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import struct

MAGIC_COOKIE = 0x2112A442
BINDING_REQUEST = 0x0001
BINDING_SUCCESS = 0x0101
MAPPED_ADDRESS = 0x0001
XOR_MAPPED_ADDRESS = 0x0020
RETRIES_S = (0.5, 1.0, 2.0)


class DiscoveryError(Exception):
    """No usable answer from the STUN server; the message is one line."""


def parse_stun_url(url: str) -> tuple[str, int]:
    """`stun:host[:port]` (RFC 7064; also stuns:, and [v6] literals) -> (host, port); 3478 by default."""
    scheme, sep, rest = url.strip().partition(":")
    if not sep or scheme.lower() not in ("stun", "stuns") or not rest or "?" in rest or "/" in rest:
        raise ValueError(f"a STUN server is stun:HOST[:PORT], got {url!r}")
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port = tail[1:] if tail.startswith(":") else ""
    else:
        host, _, port = rest.partition(":")
    if not host or (port and not port.isdigit()) or not 0 < int(port or 3478) < 65536:
        raise ValueError(f"a STUN server is stun:HOST[:PORT], got {url!r}")
    return host, int(port or 3478)


def binding_request(transaction_id: bytes) -> bytes:
    return struct.pack("!HHI12s", BINDING_REQUEST, 0, MAGIC_COOKIE, transaction_id)


def mapped_address(response: bytes, transaction_id: bytes) -> str | None:
    """The address in a Binding success response to `transaction_id` (XOR-MAPPED-ADDRESS, else the old
    MAPPED-ADDRESS); None for anything else (another message, another transaction, no address)."""
    if len(response) < 20:
        return None
    kind, length, cookie, tid = struct.unpack("!HHI12s", response[:20])
    if (kind, cookie, tid) != (BINDING_SUCCESS, MAGIC_COOKIE, transaction_id) or len(response) < 20 + length:
        return None
    found: dict[int, str] = {}
    pos, end = 20, 20 + length
    while pos + 4 <= end:
        attr, size = struct.unpack("!HH", response[pos : pos + 4])
        value = response[pos + 4 : pos + 4 + size]
        pos += 4 + size + (-size % 4)
        if attr not in (XOR_MAPPED_ADDRESS, MAPPED_ADDRESS) or len(value) < 8:
            continue
        family = value[1]
        raw = value[4:8] if family == 1 else value[4:20]
        if (family, len(raw)) not in ((1, 4), (2, 16)):
            continue
        if attr == XOR_MAPPED_ADDRESS:
            mask = struct.pack("!I", MAGIC_COOKIE) + transaction_id
            raw = bytes(b ^ m for b, m in zip(raw, mask, strict=False))
        found[attr] = str(ipaddress.ip_address(raw))
    return found.get(XOR_MAPPED_ADDRESS) or found.get(MAPPED_ADDRESS)


class _Exchange(asyncio.DatagramProtocol):
    def __init__(self, transaction_id: bytes) -> None:
        self.transaction_id = transaction_id
        self.answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        address = mapped_address(data, self.transaction_id)
        if address is not None and not self.answer.done():
            self.answer.set_result(address)

    def error_received(self, exc: Exception) -> None:
        if not self.answer.done():
            self.answer.set_exception(exc)


async def discover_public_address(
    stun_url: str, local_address: str | None = None, retries_s: tuple[float, ...] = RETRIES_S
) -> str:
    """The address `stun_url`'s server sees this machine's requests come from.

    `local_address` binds the request's socket (None: any, as the media sockets do). Tried three times,
    0.5/1/2 s apart as RFC 8489's retransmissions; no answer is a DiscoveryError (one line)."""
    host, port = parse_stun_url(stun_url)
    loop = asyncio.get_running_loop()
    transaction_id = os.urandom(12)
    try:
        transport, protocol = await loop.create_datagram_endpoint(
            lambda: _Exchange(transaction_id),
            remote_addr=(host, port),
            local_addr=(local_address, 0) if local_address else None,
        )
    except OSError as exc:
        raise DiscoveryError(f"STUN server {stun_url}: {exc.strerror or exc}") from None
    try:
        for wait_s in retries_s:
            transport.sendto(binding_request(transaction_id))
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(asyncio.shield(protocol.answer), wait_s)
        raise DiscoveryError(
            f"STUN server {stun_url} did not answer in {sum(retries_s):g} s: give the address itself with "
            "--ice-public-address IP, or a STUN server this machine can reach"
        )
    except OSError as exc:  # e.g. ICMP port unreachable, reported on the next receive
        raise DiscoveryError(f"STUN server {stun_url}: {exc.strerror or exc}") from None
    finally:
        transport.close()
