"""Headless Chromium as the tests run it (Debian's `chromium`, as root): the flags live in loadgen.chromium,
which the browser benchmark shares."""

from __future__ import annotations

from loadgen.chromium import CHROMIUM, HEADLESS_FLAGS

__all__ = ["CHROMIUM", "HEADLESS_FLAGS"]
