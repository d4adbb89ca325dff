"""Headless Chromium driven over the DevTools protocol: the flags it runs with here, `launch` (a browser on a
page, ended with its block) and the smallest client that evaluates JavaScript in a page. Used by the browser
tests (publisher, viewer, A/V sync, dashboard) and by bench/browser_uplink.py (a real browser
publishing through a shaped link).

Without the background-networking flags Chromium tries to reach Google's services at start-up, which a
closed network refuses; everything here only ever loads pages from 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import psutil

from loadgen.embedded import free_port
from loadgen.processes import stop_process

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
    """The smallest DevTools client: numbered requests on one page target, replies matched by id."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, reply_timeout_s: float = 10.0) -> None:
        self.ws = ws
        self.reply_timeout_s = reply_timeout_s
        self._id = 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        """The result of `method`; RuntimeError when Chromium answers an error or the socket closes."""
        self._id += 1
        await self.ws.send_json({"id": self._id, "method": method, "params": params})
        while True:
            msg = await self.ws.receive(timeout=self.reply_timeout_s)
            if msg.type != aiohttp.WSMsgType.TEXT:
                raise RuntimeError(f"DevTools socket closed: {msg.type}")
            data = json.loads(msg.data)
            if data.get("id") == self._id:
                if "error" in data:
                    raise RuntimeError(f"{method}: {data['error']}")
                result: dict[str, Any] = data.get("result", {})
                return result

    async def evaluate(self, expression: str) -> Any:
        r = await self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        return r.get("result", {}).get("value")


@dataclass
class Browser:
    """A running headless Chromium: its first page, and more tabs on demand."""

    http: aiohttp.ClientSession
    devtools: int
    page: Page

    @contextlib.asynccontextmanager
    async def new_tab(self, url: str) -> AsyncIterator[Page]:
        new = f"http://127.0.0.1:{self.devtools}/json/new?{urllib.parse.quote(url, safe='')}"
        async with self.http.put(new) as r:
            target = await r.json()
        async with self.http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            yield Page(ws, self.page.reply_timeout_s)


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
    url: str,
    profile_dir: str,
    devtools: int,
    extra_flags: tuple[str, ...] = (),
    flags: tuple[str, ...] = PUBLISHER_FLAGS,
) -> subprocess.Popen[bytes]:
    """Headless Chromium (by default a publisher with a fake camera) on `url` (e.g. the gateway's
    /demo?autostart=1), a fresh profile in `profile_dir` and DevTools on `devtools`."""
    return subprocess.Popen(
        [CHROMIUM, *flags, *extra_flags, f"--user-data-dir={profile_dir}",
         f"--remote-debugging-port={devtools}", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


@contextlib.asynccontextmanager
async def launch(
    url: str,
    *,
    extra_flags: tuple[str, ...] = (),
    flags: tuple[str, ...] = PUBLISHER_FLAGS,
    deadline: float | None = None,
    reply_timeout_s: float = 10.0,
) -> AsyncIterator[Browser]:
    """`open_page` with a fresh profile and free DevTools port, connected to its first page (by `deadline`,
    default a minute); the browser is ended (terminated, then killed) when the block leaves."""
    devtools = free_port()
    with tempfile.TemporaryDirectory() as profile:
        browser = open_page(url, profile, devtools, extra_flags, flags)
        try:
            async with aiohttp.ClientSession() as http:
                ws_url = await page_ws(http, devtools, deadline or time.monotonic() + 60)
                async with http.ws_connect(ws_url, max_msg_size=0) as ws:
                    yield Browser(http, devtools, Page(ws, reply_timeout_s))
        finally:
            stop_browser(browser)


def stop_browser(browser: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """The browser and every process it started (renderer, GPU, crash handler) ended: a child still writing
    to the profile when its directory is removed makes the removal fail (ENOTEMPTY)."""
    try:
        children = psutil.Process(browser.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    stop_process(browser, grace_s)
    _, alive = psutil.wait_procs(children, timeout=grace_s)
    for child in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    psutil.wait_procs(alive, timeout=grace_s)
