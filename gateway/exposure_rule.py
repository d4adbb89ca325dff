"""One rule for every listener the process opens: beyond loopback, a token is required, or --allow-anonymous.

The public port (--host), the metrics listener (--metrics-address) and the front process's socket are
judged alike, and by the addresses they resolve to and bind, never by name: `localhost` is whatever the
resolver says (an /etc/hosts line can point it elsewhere), and an empty host is every address. The rule is
checked twice: `check_listeners` resolves each listener's host as the bind will (AI_PASSIVE) before
anything listens, so a bad setting is one line and exit 2; `check_bound` looks at the socket addresses the
listeners actually got, so what a later resolution gives cannot slip through either. Refusing at start is
the closed default (how LiveKit, MediaMTX and Janus compare: docs/ARCHITECTURE.md, "Hardening").
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass

Resolve = Callable[[str | None, int], list[str]]


@dataclass(frozen=True)
class Listener:
    name: str  # the flag that sets its address, for the message
    host: str
    port: int


def resolve_passive(host: str | None, port: int) -> list[str]:
    """The addresses a listening socket on `host` binds, as asyncio's create_server resolves them."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    return sorted({str(info[4][0]) for info in infos})


def beyond_loopback(addresses: Iterable[str]) -> list[str]:
    """The addresses that reach past this machine (the wildcard included)."""
    out = []
    for text in addresses:
        try:
            address = ipaddress.ip_address(str(text).split("%")[0])
        except ValueError:
            out.append(str(text))  # not an IP address (a Unix socket is not passed here): not trusted
            continue
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_loopback:
            out.append(str(address))
    return out


def _refusal(listener: Listener, exposed: list[str]) -> ValueError:
    where = ", ".join(exposed)
    named = "" if listener.host in exposed else f"; {listener.host or 'every address'} resolves to {where}"
    return ValueError(
        f"refusing to listen on {where} without a token ({listener.name}{named}): give --token-file "
        "(or LIVEFUSE_TOKEN_FILE, --tenants-file), or --allow-anonymous to make every caller an admin"
    )


def check_listeners(
    listeners: Iterable[Listener], *, open_: bool, resolve: Resolve = resolve_passive
) -> None:
    """Before binding: ValueError (one line) when a listener would reach past loopback with `open_` (no
    token and no --allow-anonymous). A host that does not resolve is left to the bind to report."""
    if not open_:
        return
    for listener in listeners:
        try:
            addresses = resolve(listener.host, listener.port)
        except OSError:
            continue
        exposed = beyond_loopback(addresses)
        if exposed:
            raise _refusal(listener, exposed)


def check_bound(listener: Listener, socknames: Iterable[object], *, open_: bool) -> None:
    """After binding: the same rule on the socket addresses the listener got."""
    if not open_:
        return
    addresses = [str(s[0]) for s in socknames if isinstance(s, tuple) and len(s) >= 2]
    exposed = beyond_loopback(addresses)
    if exposed:
        raise _refusal(listener, exposed)
