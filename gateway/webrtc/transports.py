"""One hook on a peer connection's DTLS transports, shared by every extension that needs them.

aiortc makes a DTLS transport per transceiver (and for SCTP) in a private factory. ICE gathering, the DTLS
watch and the load generator's impaired links each need every transport, present and future; one wrapper of
that factory calls each registered hook in the order they were registered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiortc import RTCPeerConnection

from gateway.webrtc import compat

_HOOKS = "_livefuse_dtls_hooks"

TransportHook = Callable[[Any], None]


def dtls_transports(pc: RTCPeerConnection) -> list[Any]:
    """The DTLS transports `pc` has now (each once)."""
    found = [t.receiver.transport for t in pc.getTransceivers()]
    if pc.sctp is not None:
        found.append(pc.sctp.transport)
    return list({id(t): t for t in found}.values())


def on_dtls_transports(pc: RTCPeerConnection, key: str, hook: TransportHook) -> bool:
    """Call `hook(transport)` on every DTLS transport of `pc`, now and as aiortc makes them; registering
    `key` again replaces its hook in place. False (nothing changed) on an aiortc without the factory."""
    if not compat.supported() or not hasattr(pc, compat.PC_CREATE_DTLS_TRANSPORT):
        return False
    hooks: dict[str, TransportHook] | None = getattr(pc, _HOOKS, None)
    if hooks is None:
        hooks = {}
        original = getattr(pc, compat.PC_CREATE_DTLS_TRANSPORT)
        registered = hooks

        def create_dtls_transport(*args: Any, **kwargs: Any) -> Any:
            transport = original(*args, **kwargs)
            for each in list(registered.values()):
                each(transport)
            return transport

        setattr(pc, compat.PC_CREATE_DTLS_TRANSPORT, create_dtls_transport)
        setattr(pc, _HOOKS, hooks)
    hooks[key] = hook
    for transport in dtls_transports(pc):
        hook(transport)
    return True
