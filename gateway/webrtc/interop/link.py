"""A link model between one peer connection and the network: each datagram delayed, reordered or dropped.

The load generator's impaired networks (netem's and tbf's models, in the process: the kernels here have no
`sch_netem`) decide per datagram; this is where their decisions meet aioice. It wraps `Connection.sendto`
and `data_received` on one connection's ICE connections only; STUN is not impaired (aioice handles it
before `data_received`). The decisions come from `Admit` callables, so the model stays pure and seeded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.webrtc import chain, compat

LAYER = "link model"
MARK = "_livefuse_impaired"

# (datagram bytes, loop time) -> the loop time it arrives, or None: dropped
Admit = Callable[[int, float], float | None]


def delay_datagrams(dtls_transport: Any, key: object, outgoing: Admit | None, incoming: Admit | None) -> None:
    """Send and receive the datagrams of `dtls_transport`'s ICE connection through `outgoing` /
    `incoming` (None: that direction as it is). Once per connection for `key`."""
    connection = compat.ice_connection(dtls_transport)
    if getattr(connection, MARK, None) is key:
        return
    setattr(connection, MARK, key)
    loop = asyncio.get_running_loop()

    if outgoing is not None:
        admit_out = outgoing

        def make_send(
            send: Callable[[bytes, int], Awaitable[None]],
        ) -> Callable[[bytes, int], Awaitable[None]]:
            pending: set[asyncio.Task[None]] = set()

            async def deliver(data: bytes, component: int) -> None:
                try:
                    await send(data, component)
                except ConnectionError:
                    pass  # the connection closed while the datagram was "in flight"

            def launch(data: bytes, component: int) -> None:
                task = loop.create_task(deliver(data, component))
                pending.add(task)
                task.add_done_callback(pending.discard)

            async def sendto(data: bytes, component: int) -> None:
                at = admit_out(len(data), loop.time())
                if at is not None:
                    loop.call_at(at, launch, data, component)

            return sendto

        chain.wrap(connection, "sendto", LAYER, make_send)

    if incoming is not None:
        admit_in = incoming

        def make_receive(receive: Callable[[bytes, int], None]) -> Callable[[bytes, int], None]:
            def data_received(data: bytes, component: int) -> None:
                at = admit_in(len(data), loop.time())
                if at is not None:
                    loop.call_at(at, receive, data, component)

            return data_received

        chain.wrap(connection, "data_received", LAYER, make_receive)
