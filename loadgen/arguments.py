"""Command-line value types that the load generator and the benchmarks share, so each is parsed one way.

A resolution is written `WxH` everywhere (`640x360`); every tool that takes one parses it here, and its
error is both an argparse type error (a one-line usage message) and a ValueError (for callers that parse
a value outside argparse).
"""

from __future__ import annotations

import argparse


class ResolutionError(argparse.ArgumentTypeError, ValueError):
    """A resolution that is not `WxH` with two positive integers."""


def parse_resolution(text: str) -> tuple[int, int]:
    """`"640x360"` -> `(640, 360)`; case-insensitive `x`, both sides positive integers."""
    try:
        w, h = (int(x) for x in str(text).lower().split("x"))
    except ValueError:
        raise ResolutionError(f"resolution must be WxH, got {text!r}") from None
    if w <= 0 or h <= 0:
        raise ResolutionError(f"resolution must be positive, got {text!r}")
    return w, h
