"""Find and check the encoder libraries called through ctypes: libvpx and libx264.

PyAV's wheel bundles both (`av.libs/`, already loaded by libavcodec); the system's copy is the fallback. A
library is used only when its structure layouts match what the binding declares (`check_layouts`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

logger = logging.getLogger(__name__)


class CheckedLibrary(Protocol):
    def check_layouts(self) -> None: ...


LibraryT = TypeVar("LibraryT", bound=CheckedLibrary)


def candidate_paths(name: str) -> list[str]:
    """PyAV's bundled `lib<name>` first, then the system's."""
    import av

    bundled = sorted((Path(av.__file__).resolve().parent.parent / "av.libs").glob(f"lib{name}*.so*"))
    system = ctypes.util.find_library(name)
    return [str(path) for path in bundled] + ([system] if system else [])


def load_first(
    name: str,
    paths: list[str] | None,
    bind: Callable[[ctypes.CDLL, str], LibraryT],
    errors: tuple[type[Exception], ...],
) -> LibraryT | None:
    """The first of `paths` (default: `candidate_paths(name)`) that loads, binds and passes its layout check;
    None when none does (logged once by the caller)."""
    caught: tuple[type[Exception], ...] = (OSError, AttributeError, *errors)
    for path in candidate_paths(name) if paths is None else paths:
        try:
            library = bind(ctypes.CDLL(path), path)
            library.check_layouts()
        except caught as exc:
            logger.info("lib%s at %s not used: %s", name, path, exc)
            continue
        return library
    return None
