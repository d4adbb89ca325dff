"""The one way a method of an aiortc (or aioice) object is changed: a named layer, read back from the object.

A wrapper made here carries its layer's name and the callable it wrapped (`__wrapped__`, as
`functools.wraps` leaves it), so `layers` reads the chain from the objects themselves, never from a second
record that could drift from them. A peer connection's two private factories (a DTLS transport per
transceiver and one for SCTP; each transceiver) are wrapped once each and call the features' hooks in the
order they were registered, so a feature reaches every transport or transceiver, present and future.
`gateway.webrtc.install` decides the order; each feature says what its layer does. Names come from `compat`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from aiortc import RTCPeerConnection

from gateway.webrtc import compat

LAYER = "__livefuse_layer__"
Make = Callable[[Any], Callable[..., Any]]
Hook = Callable[[Any], None]

DTLS_LAYER = "DTLS transport hooks"
TRANSCEIVER_LAYER = "transceiver hooks"
_DTLS_HOOKS = "_livefuse_dtls_hooks"
_TRANSCEIVER_HOOKS = "_livefuse_transceiver_hooks"


def wrap(target: Any, name: str, layer: str, make: Make) -> Callable[..., Any]:
    """Set `target.name` to `make(current)`, named `layer`; returns the callable it wrapped."""
    original = getattr(target, name)
    wrapper = make(original)
    if not inspect.isfunction(wrapper):
        raise TypeError(f"the {layer} layer must be a function, not {type(wrapper).__name__}")
    setattr(wrapper, LAYER, layer)
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(target, name, wrapper)
    return original  # type: ignore[no-any-return]


def wrap_undoable(target: Any, name: str, layer: str, make: Make) -> Callable[[], None]:
    """`wrap`, and the undo: it puts back what was wrapped while this layer is still the outermost."""
    original = wrap(target, name, layer, make)
    wrapper = getattr(target, name)

    def undo() -> None:
        if getattr(target, name) is wrapper:
            setattr(target, name, original)

    return undo


def layers(target: Any, name: str) -> tuple[str, ...]:
    """The named layers on `target.name`, outermost first (aiortc's own method is not listed)."""
    found: list[str] = []
    current = getattr(target, name, None)
    while current is not None and hasattr(current, LAYER):
        found.append(getattr(current, LAYER))
        current = getattr(current, "__wrapped__", None)
    return tuple(found)


# --- a peer connection's factories ----------------------------------------------------------------------
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

        wrap(pc, name, layer, make)
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
