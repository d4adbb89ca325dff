"""Runs INSIDE a private network namespace (test_egress_janus.py starts it with `unshare -n` and gives it a
veth pair at 10.77.0.1/24, no route out): Janus (VideoRoom), the WHIP front for it (tests.harness.janus),
a gateway and an aiortc publisher sending video and Opus with `?egress=` to the front. Prints one JSON line
with what Janus's admin API counted and what the front and the gateway saw; the test asserts on it.

Why a separate process: Janus gathers no loopback candidates, so the namespace needs an interface of its own,
and media must still never leave the machine.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import aiohttp
import numpy as np
from aiohttp import web
from aiortc import RTCRtpSender
from aiortc.mediastreams import AudioStreamTrack

from gateway.config import GatewayConfig
from gateway.egress.config import EgressConfig
from gateway.egress.policy import RetryConfig
from gateway.http.egress import TOKEN_HEADER
from gateway.webrtc.install import create_peer_connection
from loadgen.track import StampedVideoTrack
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import LOOPBACK, start_gateway
from tests.harness.janus import JanusServer, WhipFront, media_in, selected_pair
from tests.harness.peers import negotiate

FRONT_PORT = 18090
TOKEN = "janus-front-secret"


async def _until(check: Any, timeout_s: float, step_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    value = await check()
    while not value and time.monotonic() < deadline:
        await asyncio.sleep(step_s)
        value = await check()
    return value


async def run(timeout_s: float) -> dict[str, Any]:
    result: dict[str, Any] = {"ok": False}
    janus = JanusServer()
    await janus.start()
    front = WhipFront(janus, TOKEN, fail_first=1)
    front_runner = web.AppRunner(front.app())
    await front_runner.setup()
    await web.TCPSite(front_runner, "127.0.0.1", FRONT_PORT).start()
    monitor = RecordingMonitor()
    config = GatewayConfig(
        host="127.0.0.1",
        port=0,
        ice=LOOPBACK,  # the publisher on loopback; the egress peer gathers on the veth (aioice's choice)
        egress=EgressConfig(
            allowed_prefixes=(f"http://127.0.0.1:{FRONT_PORT}/",),
            retry=RetryConfig(first_delay_s=0.5, max_delay_s=2.0),
        ),
    )
    gw = await start_gateway(config, pipeline=FakePipeline(), monitor=monitor)
    pc = create_peer_connection(LOOPBACK)
    try:
        async with aiohttp.ClientSession() as http:
            rng = np.random.default_rng(7)
            images = [rng.integers(0, 255, (240, 320, 3), dtype=np.uint8) for _ in range(3)]
            pc.addTransceiver(StampedVideoTrack.from_rgb(images, 15.0), direction="sendrecv")
            audio = pc.addTransceiver(AudioStreamTrack(), direction="sendonly")
            caps = RTCRtpSender.getCapabilities("audio").codecs
            audio.setCodecPreferences([c for c in caps if c.mimeType.lower() == "audio/opus"])
            target = f"http://127.0.0.1:{FRONT_PORT}/whip/1234"
            status, body, location = await negotiate(
                http, f"{gw.url}/whip?processors=none&egress={target}", pc, {TOKEN_HEADER: TOKEN}
            )
            result["whip_status"] = status
            if status != 201:
                result["error"] = body
                return result
            session_id = location.rsplit("/", 1)[-1]
            egress_url = f"{gw.url}/sessions/{session_id}/egress"

            async def live() -> dict[str, Any] | None:
                async with http.get(egress_url) as r:
                    data = dict(await r.json())
                return data if data["state"] == "live" else None

            result["egress"] = await _until(live, timeout_s / 3)
            published = list(front.publishers.values())
            result["publishers"] = len(published)
            if not published:
                result["error"] = "no publisher reached Janus"
                return result
            pub = published[0]

            async def counted() -> dict[str, dict[str, Any]] | None:
                info = await janus.handle_info(http, pub.session_id, pub.handle_id)
                result["janus_media"] = media = media_in(info)
                result["janus_pair"] = selected_pair(info)
                video, audio = media.get("video", {}), media.get("audio", {})
                return media if video.get("packets", 0) >= 150 and audio.get("packets", 0) >= 100 else None

            result["janus_reached"] = bool(await _until(counted, timeout_s / 3, 0.5))
            async with http.get(f"{gw.url}/sessions/{session_id}") as r:
                result["session"] = await r.json()
            async with http.delete(f"{gw.url}/whip/{session_id}") as r:
                result["delete_status"] = r.status

            async def deleted() -> bool:
                return pub.deleted

            result["janus_deleted"] = await _until(deleted, 15)
            result["janus_sessions_after"] = await janus.list_sessions(http)
            result["front_requests"] = front.requests
            result["events"] = [d for kind, _, d in monitor.events if kind == "egress"]
            result["ok"] = True
            return result
    finally:
        await pc.close()
        await gw.stop()
        await front_runner.cleanup()
        janus.stop()
        if not result.get("ok"):
            result["janus_log"] = janus.log_tail()


def main() -> None:
    timeout_s = float(sys.argv[1]) if len(sys.argv) > 1 else 90.0
    result = asyncio.run(asyncio.wait_for(run(timeout_s), timeout_s + 30))
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
