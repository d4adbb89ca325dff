"""aiortc's decoder factory: the one module-level name the extensions replace (process-wide, so undoable).

Each new receiver asks `aiortc.rtcrtpreceiver.get_decoder` for its decoder; hardware decode
(codecs.hw_decode) wraps it while the app runs and the undo puts aiortc's back.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from gateway.webrtc import compat
from gateway.webrtc.patches import chain

Make = Callable[[Any], Callable[..., Any]]


def _module() -> Any:
    return importlib.import_module(compat.RECEIVER_MODULE)


def wrap_get_decoder(layer: str, make: Make) -> Callable[[], None]:
    """Wrap the factory every new receiver asks; returns the undo (a no-op when nothing was wrapped: on an
    aiortc the name was not checked against, with one warning)."""
    if compat.refused("hardware decode (the receivers' decoder factory)"):
        return lambda: None
    module = _module()
    original = chain.wrap(module, compat.RECEIVER_GET_DECODER, layer, make)
    wrapper = getattr(module, compat.RECEIVER_GET_DECODER)

    def undo() -> None:
        if getattr(module, compat.RECEIVER_GET_DECODER) is wrapper:
            setattr(module, compat.RECEIVER_GET_DECODER, original)

    return undo


def layers() -> tuple[str, ...]:
    """The layers on the decoder factory now, outermost first."""
    return chain.layers(_module(), compat.RECEIVER_GET_DECODER)
