"""RTCPeerConnection: the two private factories every extension that needs new transports or transceivers
hooks, each wrapped once per connection with an ordered set of named hooks.

aiortc makes a DTLS transport per transceiver (and for SCTP), and each transceiver, in private factories.
ICE gathering, the DTLS watch and the load generator's impaired links each need every DTLS transport,
present and future; marker release needs every video receiver. One wrapper of each factory calls the
registered hooks in the order they were registered (`gateway.webrtc.install` registers them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiortc import RTCPeerConnection

from gateway.webrtc import compat
from gateway.webrtc.patches import chain

_DTLS_HOOKS = "_livefuse_dtls_hooks"
_TRANSCEIVER_HOOKS = "_livefuse_transceiver_hooks"
DTLS_LAYER = "DTLS transport hooks"
TRANSCEIVER_LAYER = "transceiver hooks"

Hook = Callable[[Any], None]


def dtls_transports(pc: RTCPeerConnection) -> list[Any]:
    """The DTLS transports `pc` has now (each once)."""
    found = [t.receiver.transport for t in pc.getTransceivers()]
    if pc.sctp is not None:
        found.append(pc.sctp.transport)
    return list({id(t): t for t in found}.values())


def _hooks(pc: RTCPeerConnection, name: str, mark: str, layer: str) -> dict[str, Hook]:
    """The hooks on `pc`'s factory `name`, the factory wrapped on first use."""
    hooks: dict[str, Hook] | None = getattr(pc, mark, None)
    if hooks is None:
        registered: dict[str, Hook] = {}

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def create(*args: Any, **kwargs: Any) -> Any:
                made = original(*args, **kwargs)
                for each in list(registered.values()):
                    each(made)
                return made

            return create

        chain.wrap(pc, name, layer, make)
        setattr(pc, mark, registered)
        hooks = registered
    return hooks


def on_dtls_transports(pc: RTCPeerConnection, key: str, hook: Hook) -> bool:
    """Call `hook(transport)` on every DTLS transport of `pc`, now and as aiortc makes them; registering
    `key` again replaces its hook in place. False (nothing changed) on an aiortc without the factory."""
    if not compat.supported() or not hasattr(pc, compat.PC_CREATE_DTLS_TRANSPORT):
        return False
    _hooks(pc, compat.PC_CREATE_DTLS_TRANSPORT, _DTLS_HOOKS, DTLS_LAYER)[key] = hook
    for transport in dtls_transports(pc):
        hook(transport)
    return True


def on_transceivers(pc: RTCPeerConnection, key: str, hook: Hook) -> bool:
    """Call `hook(transceiver)` on every transceiver of `pc`, now and as aiortc makes them (`key` again
    replaces its hook in place). False (nothing changed) on an aiortc without the factory."""
    if not compat.supported() or not hasattr(pc, compat.PC_CREATE_TRANSCEIVER):
        return False
    for transceiver in pc.getTransceivers():
        hook(transceiver)
    _hooks(pc, compat.PC_CREATE_TRANSCEIVER, _TRANSCEIVER_HOOKS, TRANSCEIVER_LAYER)[key] = hook
    return True


def hook_keys(pc: RTCPeerConnection) -> dict[str, tuple[str, ...]]:
    """The hooks registered on each factory, in the order they run (what the wrap-chain test reads)."""
    return {
        layer: tuple(getattr(pc, mark, None) or ())
        for layer, mark in ((DTLS_LAYER, _DTLS_HOOKS), (TRANSCEIVER_LAYER, _TRANSCEIVER_HOOKS))
    }


def certificates(pc: RTCPeerConnection) -> list[Any]:
    """The certificates `pc` offers its DTLS transports."""
    return list(getattr(pc, compat.PC_CERTIFICATES))
