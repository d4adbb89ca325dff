"""Runs INSIDE a loopback-only network namespace (test_browser_avsync.py starts it with `unshare -n`): a
gateway whose (fake) processing takes 80 ms, an aiortc publisher sending a click and a white flash at the same
instants every second, and headless Chromium as a WHEP viewer of that session. The page measures what a
person would: when each click is HEARD (AudioWorklet, mapped to performance time through
`AudioContext.getOutputTimestamp`) and when each flash is SHOWN (`requestVideoFrameCallback`'s
expectedDisplayTime). Chromium lines the two streams up from the gateway's RTCP sender reports, so the
offset tells whether those reports tell the truth. Prints one JSON line.

    argv: timeout_s [stamp|nostamp|direct]
      nostamp: the gateway with aiortc's own send-time reports (the control)
      direct:  no gateway: the same aiortc publisher answers the browser itself (Chromium's own bias)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import aiohttp
import cv2
import numpy as np
from aiohttp import web

import gateway.media.session_audio as session_audio
from gateway.app import create_app, wait_started
from gateway.config import GatewayConfig
from gateway.webrtc.interop.ice import IceConfig
from loadgen.chromium import launch
from loadgen.embedded import start_site

CLICKS = int(os.environ.get("AVSYNC_CLICKS", "14"))
DELAY_MS = float(os.environ.get("AVSYNC_DELAY_MS", "80"))

PAGE = """<!doctype html><meta charset="utf-8"><title>avsync</title>
<video id="v" playsinline autoplay muted style="width:320px"></video>
<script>
window.avsync = {clicks: [], flashes: [], frames: 0, state: "starting", error: null};
(async () => {
  try {
    const S = window.avsync;
    const session = new URLSearchParams(location.search).get("session");
    const pc = new RTCPeerConnection();
    pc.addTransceiver("video", {direction: "recvonly"});
    pc.addTransceiver("audio", {direction: "recvonly"});
    const tracks = {};
    pc.ontrack = (e) => { tracks[e.track.kind] = e.track; };
    await pc.setLocalDescription(await pc.createOffer());
    await new Promise((r) => { if (pc.iceGatheringState === "complete") r();
      pc.onicegatheringstatechange = () => pc.iceGatheringState === "complete" && r(); });
    const url = session === "direct" ? "/direct" : "/whep/" + session;
    const resp = await fetch(url, {method: "POST", headers: {"Content-Type": "application/sdp"},
                                                  body: pc.localDescription.sdp});
    if (resp.status !== 201) throw new Error("WHEP " + resp.status + " " + await resp.text());
    await pc.setRemoteDescription({type: "answer", sdp: await resp.text()});
    pc.onconnectionstatechange = () => { S.state = pc.connectionState; };
    const v = document.getElementById("v");
    v.srcObject = new MediaStream([tracks.video, tracks.audio]);  // the element pulls the audio too
    await v.play();
    const ctx = new AudioContext({sampleRate: 48000});
    const code = `class Onsets extends AudioWorkletProcessor {
      constructor() { super(); this.last = -1; }
      process(inputs) {
        const ch = inputs[0] && inputs[0][0];
        if (ch) for (let i = 0; i < ch.length; i++) if (Math.abs(ch[i]) > 0.25) {
          const t = currentTime + i / sampleRate;
          if (t - this.last > 0.5) this.port.postMessage(t);
          this.last = t; break;
        }
        return true;
      } }
      registerProcessor("onsets", Onsets);`;
    await ctx.audioWorklet.addModule(URL.createObjectURL(new Blob([code], {type: "text/javascript"})));
    const node = new AudioWorkletNode(ctx, "onsets");
    ctx.createMediaStreamSource(new MediaStream([tracks.audio])).connect(node);
    node.connect(ctx.destination);
    await ctx.resume();
    node.port.onmessage = (e) => {
      const ts = ctx.getOutputTimestamp();
      S.clicks.push(ts.performanceTime + (e.data - ts.contextTime) * 1000);
    };
    const canvas = document.createElement("canvas");
    canvas.width = 16; canvas.height = 16;
    const g = canvas.getContext("2d", {willReadFrequently: true});
    let bright = false;
    const onFrame = (now, meta) => {
      S.frames++;
      g.drawImage(v, 0, 0, 16, 16);
      const px = g.getImageData(0, 0, 16, 16).data;
      let sum = 0;
      for (let i = 0; i < px.length; i += 4) sum += px[i] + px[i + 1] + px[i + 2];
      const isBright = sum / (px.length / 4) / 3 > 200;
      if (isBright && !bright) S.flashes.push(meta.expectedDisplayTime);
      bright = isBright;
      v.requestVideoFrameCallback(onFrame);
    };
    v.requestVideoFrameCallback(onFrame);
    S.state = "running";
  } catch (e) { window.avsync.error = String(e); }
})();
</script>"""


def _astronaut() -> np.ndarray:
    from loadgen.media import default_media_dir

    image = cv2.imread(str(default_media_dir(os.environ) / "astronaut.png"))
    if image is None:
        raise RuntimeError("astronaut.png is not provisioned (python -m engines.models fetch / make models)")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


async def _publish(base: str, http: aiohttp.ClientSession) -> tuple[Any, str]:
    from gateway.webrtc.install import create_peer_connection
    from loadgen.avsync import ClickAudioTrack, MediaClock
    from tests.harness.gateway import LOOPBACK
    from tests.harness.media import flash_track
    from tests.harness.peers import negotiate, source_query

    astronaut = _astronaut()
    query = await source_query(http, base, astronaut)
    clock = MediaClock()
    pc = create_peer_connection(LOOPBACK)
    pc.addTransceiver(flash_track(cv2.resize(astronaut, (320, 240)), clock), direction="sendonly")
    pc.addTransceiver(ClickAudioTrack(clock), direction="sendonly")
    status, body, location = await negotiate(http, f"{base}/whip{query}", pc, None)
    if status != 201:
        raise RuntimeError(f"WHIP {status}: {body}")
    return pc, location.rsplit("/", 1)[-1]


def offsets_ms(clicks: list[float], flashes: list[float]) -> list[float]:
    """Each heard click against the shown flash nearest to it (+ = the sound came after the picture)."""
    out = []
    for c in clicks:
        if flashes:
            f = min(flashes, key=lambda x: abs(x - c))
            if abs(c - f) < 400:
                out.append(round(c - f, 1))
    return out


async def run(timeout_s: float, mode: str) -> dict[str, Any]:
    from tests.harness.fakes import FakePipeline, RecordingMonitor

    if mode == "nostamp":
        session_audio.install_sender_clock = lambda sender, capture_of: None  # type: ignore[assignment]
    deadline = time.monotonic() + timeout_s
    config = GatewayConfig(host="127.0.0.1", port=0, ice=IceConfig.loopback_only())
    app = create_app(config, pipeline=FakePipeline(delay_s=DELAY_MS / 1000.0), monitor=RecordingMonitor())

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    app.router.add_get("/avsync", page)
    direct_pcs: list[Any] = []

    async def direct(request: web.Request) -> web.Response:
        from aiortc import RTCSessionDescription

        from gateway.webrtc.install import create_peer_connection
        from loadgen.avsync import ClickAudioTrack, MediaClock
        from tests.harness.gateway import LOOPBACK
        from tests.harness.media import flash_track

        astronaut = _astronaut()
        clock = MediaClock()
        pc = create_peer_connection(LOOPBACK)
        direct_pcs.append(pc)
        await pc.setRemoteDescription(RTCSessionDescription(sdp=await request.text(), type="offer"))
        for transceiver in pc.getTransceivers():
            track = (
                flash_track(cv2.resize(astronaut, (320, 240)), clock)
                if transceiver.kind == "video"
                else ClickAudioTrack(clock)
            )
            transceiver.sender.replaceTrack(track)
            transceiver.direction = "sendonly"
        await pc.setLocalDescription(await pc.createAnswer())
        return web.Response(status=201, text=pc.localDescription.sdp, content_type="application/sdp")

    app.router.add_post("/direct", direct)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    port = await start_site(runner)
    base = f"http://127.0.0.1:{port}"
    result: dict[str, Any] = {"ok": False, "mode": mode, "delay_ms": DELAY_MS}
    publisher = None
    try:
        await wait_started(app, 60)
        async with aiohttp.ClientSession() as http:
            if mode == "direct":
                session_id = "direct"
            else:
                publisher, session_id = await _publish(base, http)
            async with launch(f"{base}/avsync?session={session_id}", deadline=deadline) as browser:
                state: dict[str, Any] = {}
                while time.monotonic() < deadline:
                    raw = await browser.page.evaluate("JSON.stringify(window.avsync || {})")
                    state = json.loads(raw or "{}")
                    if state.get("error") or len(state.get("clicks", [])) >= CLICKS:
                        break
                    await asyncio.sleep(0.5)
                result["page"] = {k: state.get(k) for k in ("state", "frames", "error")}
                result["clicks"] = len(state.get("clicks", []))
                result["flashes"] = len(state.get("flashes", []))
                result["offsets_ms"] = offsets_ms(state.get("clicks", []), state.get("flashes", []))
                result["ok"] = not state.get("error")
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if publisher is not None:
            await publisher.close()
        for pc in direct_pcs:
            await pc.close()
        await runner.cleanup()
    return result


def main() -> int:
    timeout_s = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    mode = sys.argv[2] if len(sys.argv) > 2 else "stamp"
    if mode not in ("stamp", "nostamp", "direct"):
        print(json.dumps({"ok": False, "error": f"unknown mode {mode}"}))
        return 2
    result = asyncio.run(run(timeout_s, mode))
    print(json.dumps(result))
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    raise SystemExit(main())
