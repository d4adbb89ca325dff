"""Waiting on a condition with a deadline, instead of sleeping a fixed time that a busy machine overruns."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import aiohttp


async def wait_for(cond: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    """True as soon as `cond()` holds, else its value at the deadline."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        await asyncio.sleep(step)
    return cond()


async def until(predicate: Callable[[], Awaitable[bool]], timeout_s: float) -> bool:
    """As wait_for, for a condition that must itself be awaited (an HTTP probe)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if await predicate():
            return True
        await asyncio.sleep(0.1)
    return False


async def http_status(http: aiohttp.ClientSession, url: str) -> int | None:
    """The status a GET gets, or None while nothing answers (a process starting, restarting or gone)."""
    try:
        async with http.get(url, timeout=aiohttp.ClientTimeout(total=2)) as r:
            return r.status
    except (aiohttp.ClientError, TimeoutError):
        return None
