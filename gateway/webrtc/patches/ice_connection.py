"""aioice's Connection under one DTLS transport: what it gathers, and the datagrams it sends and receives.

Gathering (`get_component_candidates`) is re-wrapped when a connection is configured again (the last
configuration wins, over aioice's own method); `sendto` / `data_received` carry an impaired link.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.webrtc import compat
from gateway.webrtc.patches import chain

Make = Callable[[Any], Callable[..., Any]]
GATHERING = "get_component_candidates"
_STOCK_GATHERING = "_livefuse_original_gcc"


def ice_connection(dtls_transport: Any) -> Any:
    """The aioice connection a DTLS transport runs over."""
    return getattr(dtls_transport.transport.iceGatherer, compat.GATHERER_CONNECTION)


def sockets_of(connection: Any) -> list[Any]:
    """The sockets `connection` gathered (host and relay)."""
    found = []
    for protocol in getattr(connection, compat.CONNECTION_PROTOCOLS, ()):
        transport = getattr(protocol, "transport", None)
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is not None:
            found.append(sock)
    return found


def replace_gathering(connection: Any, layer: str, make: Make) -> None:
    """Wrap aioice's own gathering (once configured, a second configuration replaces the first)."""
    stock = getattr(connection, _STOCK_GATHERING, None) or getattr(connection, GATHERING)
    setattr(connection, _STOCK_GATHERING, stock)
    setattr(connection, GATHERING, stock)  # the layer goes on aioice's own method, never on a former layer
    chain.wrap(connection, GATHERING, layer, make)


def wrap_sendto(connection: Any, layer: str, make: Make) -> None:
    chain.wrap(connection, "sendto", layer, make)


def wrap_data_received(connection: Any, layer: str, make: Make) -> None:
    chain.wrap(connection, "data_received", layer, make)
