"""Chromium as an interop matrix publisher: the gateway's own /demo page, headless, its camera a clip of a
face at 640x360, publishing over WHIP and showing the processed video that comes back.

The page is the one users open; the matrix adds only a script evaluated before the page's own
(`Page.addScriptToEvaluateOnNewDocument`) that notes, in milliseconds after the WHIP POST left: the answer,
the connection's "connected", and the first processed frame decoded (the returned track's first frame, as
`requestVideoFrameCallback` or `loadeddata` reports it, whichever comes first).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

import numpy as np

from bench.interop_clients import ClientRun, face_frames

WIDTH, HEIGHT, FPS = 640, 360, 15

TIMELINE_JS = """
(() => {
  const marks = (window.__onAir = {});
  let posted = null;
  const since = () => (posted === null ? null : Math.round((performance.now() - posted) * 10) / 10);
  const mark = (name) => { if (marks[name] === undefined && posted !== null) marks[name] = since(); };
  const originalFetch = window.fetch;
  window.fetch = async function (input, init) {
    const url = String((input && input.url) || input);
    const whip = /\\/whip(\\?|$)/.test(url) && init && init.method === "POST";
    if (whip) posted = performance.now();
    const response = await originalFetch.apply(this, arguments);
    if (whip) mark("answer");
    return response;
  };
  const Original = window.RTCPeerConnection;
  function Watched(...args) {
    const pc = new Original(...args);
    pc.addEventListener("connectionstatechange", () => {
      if (pc.connectionState === "connected") mark("connected");
    });
    pc.addEventListener("track", (ev) => {
      if (ev.track.kind !== "video") return;
      const video = document.createElement("video");
      video.muted = true;
      video.style.cssText = "position:fixed;width:8px;height:8px;right:0;bottom:0";
      video.srcObject = new MediaStream([ev.track]);
      const first = () => mark("first_decoded");
      if (video.requestVideoFrameCallback) video.requestVideoFrameCallback(first);
      video.addEventListener("loadeddata", first, { once: true });
      document.body.appendChild(video);
      video.play().catch(() => {});
    });
    return pc;
  }
  Watched.prototype = Original.prototype;
  Object.setPrototypeOf(Watched, Original);
  window.RTCPeerConnection = Watched;
})();
"""


def write_face_y4m(image: Path, out: Path, seconds: float = 4.0) -> Path:
    """A Y4M clip (Chromium's fake camera reads it, looping) of `image` panned slowly at 640x360."""
    import cv2

    frames = face_frames(image, WIDTH, HEIGHT, int(FPS * seconds))
    with out.open("wb") as f:
        f.write(f"YUV4MPEG2 W{WIDTH} H{HEIGHT} F{FPS}:1 Ip A1:1 C420jpeg\n".encode())
        for rgb in frames:
            f.write(b"FRAME\n")
            f.write(np.ascontiguousarray(cv2.cvtColor(rgb, cv2.COLOR_RGB2YUV_I420)).tobytes())
    return out


async def run_chromium(url: str, token: str, camera: Path, seconds: float) -> ClientRun:
    """Publish from /demo for `seconds` after it connects (or gives up); its marks in `details`."""
    from loadgen.chromium import launch

    page_url = f"{url}/demo?autostart=1&token={token}"
    # the gateway sits on the namespace's veth address: a camera needs a secure context, which plain http
    # has only on localhost
    flags = (
        f"--use-file-for-fake-video-capture={camera}",
        f"--unsafely-treat-insecure-origin-as-secure={url}",
    )
    marks: dict[str, float] = {}
    page_log = ""
    try:
        async with launch("about:blank", extra_flags=flags) as browser:
            page = browser.page
            await page.call("Page.enable")  # without it the script below is not evaluated
            await page.call("Page.addScriptToEvaluateOnNewDocument", source=TIMELINE_JS)
            await page.call("Page.navigate", url=page_url)
            deadline = time.monotonic() + 20.0
            while time.monotonic() < deadline and "first_decoded" not in marks:
                await asyncio.sleep(0.1)
                marks = json.loads(await page.evaluate("JSON.stringify(window.__onAir || {})") or "{}")
            await asyncio.sleep(seconds)
            marks = json.loads(await page.evaluate("JSON.stringify(window.__onAir || {})") or "{}")
            page_log = str(await page.evaluate("(document.getElementById('log') || {}).textContent || ''"))
            with contextlib.suppress(Exception):  # the page's own Stop: DELETE the WHIP resource
                await page.evaluate("stop().then(() => 'stopped')")
    except (OSError, TimeoutError, RuntimeError) as exc:
        return ClientRun(False, error=f"Chromium: {exc}", details={"timeline_ms": marks})
    connected = "connected" in marks
    return ClientRun(
        connected,
        error="" if connected else f"the page never connected: {page_log.strip()[:300]}",
        details={"timeline_ms": {k: v for k, v in marks.items() if isinstance(v, int | float)}},
    )
