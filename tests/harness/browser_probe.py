"""Runs INSIDE a network namespace that has only `lo` (test_browser.py starts it with `unshare -n`): a real
gateway (real pipeline) and headless Chromium with a fake camera opening /demo?autostart=1, then the WHEP
player page (/watch) in a second tab on the link the demo gives, driven over the DevTools protocol. Prints
one JSON line with what the pages saw; the test asserts on it.

Why a separate process: the namespace must hold both ends (Chromium and the gateway) so loopback is the
only path media can take, while pytest itself stays in the normal namespace.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

from gateway.app import create_app, wait_started
from gateway.config import GatewayConfig
from gateway.webrtc.interop.ice import IceConfig
from loadgen.chromium import Page, launch
from loadgen.embedded import start_site

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# the capabilities of a browser without an H.264 encoder, put in place before Start is clicked
WITHOUT_H264 = """
for (const kind of [RTCRtpSender, RTCRtpReceiver]) {
  const real = kind.getCapabilities.bind(kind);
  kind.getCapabilities = (media) => {
    const caps = real(media);
    if (caps && media === "video") caps.codecs = caps.codecs.filter((c) => !/h264/i.test(c.mimeType));
    return caps;
  };
}
"""


async def _stats(page: Page) -> dict[str, Any]:
    value = await page.evaluate("JSON.stringify(window.livefuseStats || {})")
    return dict(json.loads(value or "{}"))


async def run(timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    config = GatewayConfig(host="127.0.0.1", port=0, ice=IceConfig.loopback_only())
    from aiohttp import web

    app = create_app(config)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    port = await start_site(runner)
    result: dict[str, Any] = {"ok": False}
    try:
        await wait_started(app, 60)
        async with launch(f"http://127.0.0.1:{port}/demo?autostart=1", deadline=deadline) as browser:
            page = browser.page
            first = await _wait(page, lambda s: s.get("framesReceived", 0) >= 30, deadline)
            result["before"] = first
            shot = await page.call("Page.captureScreenshot", format="png")
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / "demo.png").write_bytes(base64.b64decode(shot["data"]))
            await page.evaluate("window.livefuseScaleDown(2)")
            full_w = first.get("width", 0)
            after = await _wait(
                page,
                lambda s: (
                    0 < s.get("width", 0) < full_w
                    and s.get("framesReceived", 0) >= first["framesReceived"] + 30
                ),
                deadline,
            )
            result["after"] = after
            # a viewer on the gateway's WHEP player page in a second tab, from the demo's link
            async with browser.new_tab(f"http://127.0.0.1:{port}{after['watch']}&autostart=1") as viewer:
                result["viewer"] = await _wait(viewer, lambda s: s.get("framesReceived", 0) >= 30, deadline)
            # ?codec=H264 in a browser that cannot send H.264 (as Firefox without OpenH264): one line
            async with browser.new_tab(f"http://127.0.0.1:{port}/demo?codec=H264") as no_h264:
                await _wait(no_h264, lambda s: s.get("connection") == "new", deadline)  # loaded
                await no_h264.evaluate(WITHOUT_H264 + 'document.getElementById("start").click(); true')
                result["no_h264"] = await _wait_error(no_h264, time.monotonic() + 15)
            result["ok"] = True
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        from gateway.http.keys import STATE

        manager = app[STATE].sessions
        if manager is not None:
            result["gateway"] = {sid: s.summary() for sid, s in manager.sessions.items()}
        await runner.cleanup()
    return result


async def _wait_error(page: Page, deadline: float) -> str:
    while time.monotonic() < deadline:
        error = (await _stats(page)).get("error")
        if error:
            return str(error)
        await asyncio.sleep(0.25)
    seen = await page.evaluate(
        "JSON.stringify([location.href, window.livefuseStats || null, "
        "RTCRtpSender.getCapabilities('video').codecs.map((c) => c.mimeType)])"
    )
    raise TimeoutError(f"the page showed no error: {seen}")


async def _wait(page: Page, cond: Any, deadline: float) -> dict[str, Any]:
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        last = await _stats(page)
        if last.get("error"):
            raise RuntimeError(f"page error: {last['error']}")
        if cond(last):
            return last
        await asyncio.sleep(0.25)
    raise TimeoutError(f"page never got there: {last}")


def main() -> int:
    timeout_s = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    result = asyncio.run(run(timeout_s))
    print(json.dumps(result))
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    raise SystemExit(main())
