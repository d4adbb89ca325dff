"""Headless Chromium driven over the DevTools protocol: the flags it runs with here and the smallest client
that evaluates JavaScript in a page. Used by the browser tests and by loadgen/bench/browser_uplink.py (a
real browser publishing through a shaped link).

Without the background-networking flags Chromium tries to reach Google's services at start-up, which a
closed network refuses; everything here only ever loads pages from 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import Any

import aiohttp

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
# a publisher: fake camera and microphone, no permission prompt, WebRTC allowed on loopback
PUBLISHER_FLAGS: tuple[str, ...] = (
    *HEADLESS_FLAGS,
    "--use-fake-device-for-media-stream",
    "--use-fake-ui-for-media-stream",
    "--allow-loopback-in-peer-connection",
    "--autoplay-policy=no-user-gesture-required",
    "--window-size=1100,720",
)


class Page:
    """The smallest DevTools client: Runtime.evaluate on one page target."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self._id = 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        await self.ws.send_json({"id": self._id, "method": method, "params": params})
        while True:
            msg = await self.ws.receive_json(timeout=10)
            if msg.get("id") == self._id:
                result: dict[str, Any] = msg.get("result", {})
                return result

    async def evaluate(self, expression: str) -> Any:
        r = await self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        return r.get("result", {}).get("value")


async def page_ws(http: aiohttp.ClientSession, devtools: int, deadline: float) -> str:
    """The DevTools websocket URL of the browser's first page, once it is up (TimeoutError at `deadline`)."""
    while time.monotonic() < deadline:
        try:
            async with http.get(f"http://127.0.0.1:{devtools}/json/list") as r:
                pages = [t for t in await r.json() if t.get("type") == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.2)
    raise TimeoutError("Chromium's DevTools endpoint never came up")


def open_page(
    url: str, profile_dir: str, devtools: int, extra_flags: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    """Headless Chromium with a fake camera on `url` (e.g. the gateway's /demo?autostart=1), a fresh profile
    in `profile_dir` and DevTools on `devtools`."""
    return subprocess.Popen(
        [CHROMIUM, *PUBLISHER_FLAGS, *extra_flags, f"--user-data-dir={profile_dir}",
         f"--remote-debugging-port={devtools}", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
