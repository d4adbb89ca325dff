"""Headless Chromium as the tests run it (Debian's `chromium`, as root): one place for the flags.

Without the background-networking flags Chromium tries to reach Google's services at start-up, which this
machine's closed network refuses; the tests only ever load pages from 127.0.0.1.
"""

from __future__ import annotations

CHROMIUM = "/usr/bin/chromium"
HEADLESS_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
