"""What NVDEC and NVENC selection share: trying a PyAV codec once at start, and a one-line reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal


def one_line(error: BaseException) -> str:
    """An error as one line: its message's first line, or its type's name when it has none."""
    text = str(error)
    return text.splitlines()[0] if text else type(error).__name__


def probe_codec(name: str, mode: Literal["r", "w"], setup: Callable[[Any], None] | None = None) -> str | None:
    """Why the PyAV codec `name` cannot open here in `mode` ("r" decode, "w" encode), as one line, or None
    when it opened. `setup` fills in what an encoder needs before it opens (size, rate, options)."""
    try:
        import av

        if name not in av.codecs_available:
            return f"{name} is not in this PyAV build"
        ctx: Any = av.CodecContext.create(name, mode)
        if setup is not None:
            setup(ctx)
        ctx.open()
    except Exception as e:  # PyAV raises FFmpegError subclasses (no device, no driver), PermissionError...
        return f"{name}: {one_line(e)}"
    return None
