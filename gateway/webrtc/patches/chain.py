"""Named layers on one method of one object: wrap it, and read back the layers a live object carries.

A wrapper made here carries its layer's name and the callable it wrapped (`__wrapped__`, as
`functools.wraps` leaves it), so the chain is read from the objects themselves, never from a second record
that could drift from them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

LAYER = "__livefuse_layer__"


def wrap(target: Any, name: str, layer: str, make: Callable[[Any], Callable[..., Any]]) -> Callable[..., Any]:
    """Set `target.name` to `make(current)`, named `layer`; returns the callable it wrapped."""
    original = getattr(target, name)
    wrapper = make(original)
    if not inspect.isfunction(wrapper):
        raise TypeError(f"the {layer} layer must be a function, not {type(wrapper).__name__}")
    setattr(wrapper, LAYER, layer)
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(target, name, wrapper)
    return original  # type: ignore[no-any-return]


def layers(target: Any, name: str) -> tuple[str, ...]:
    """The named layers on `target.name`, outermost first (aiortc's own method is not listed)."""
    found: list[str] = []
    current = getattr(target, name, None)
    while current is not None and hasattr(current, LAYER):
        found.append(getattr(current, LAYER))
        current = getattr(current, "__wrapped__", None)
    return tuple(found)
