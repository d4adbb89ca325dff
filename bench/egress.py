"""What a WHIP egress push costs the gateway, beside what a WHEP viewer costs: one publisher (320x240 at
15 fps, moving noise so the encoder works), its session measured in three phases of `--seconds` each: only
the publisher's own return stream; plus an egress push to a local aiortc WHIP sink; the push stopped and one
WHEP viewer instead. Per phase: the gateway process's CPU (from /proc), frames the consumer received, and the
encoders the session runs (one per codec, whatever the number of consumers).

Loopback only; the gateway is the real CLI in a subprocess (`--processors none`: no model in the way). Prints
one line per phase and writes JSON with --output.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from aiohttp import web
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription

from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig
from loadgen.embedded import EmbeddedGateway, EmbeddedGatewayConfig, free_port
from loadgen.track import StampedVideoTrack

LOOPBACK = IceConfig.loopback_only()
SDP = {"Content-Type": "application/sdp"}


def moving_noise(fps: float = 15.0) -> StampedVideoTrack:
    """320x240 of noise panning across a larger field (period 64 frames), unstamped: the encoder works."""
    field = np.random.default_rng(1).integers(0, 255, (240 + 64, 320 + 64, 3), dtype=np.uint8)
    windows = [field[(2 * n) % 64 : (2 * n) % 64 + 240, n % 64 : n % 64 + 320] for n in range(64)]
    return StampedVideoTrack.from_rgb(windows, fps, stamp=False)


class Counter:
    def __init__(self) -> None:
        self.frames = 0
        self.tasks: list[asyncio.Task[None]] = []

    def consume(self, track: MediaStreamTrack) -> None:
        async def run() -> None:
            try:
                while True:
                    await track.recv()
                    self.frames += 1
            except Exception:  # noqa: BLE001  (the track ended)
                return

        self.tasks.append(asyncio.ensure_future(run()))


class Sink:
    """A WHIP endpoint: answers, counts decoded frames, closes on DELETE."""

    def __init__(self) -> None:
        self.counter = Counter()
        self.pcs: dict[str, RTCPeerConnection] = {}

    async def post(self, request: web.Request) -> web.Response:
        pc = create_peer_connection(LOOPBACK)
        pc.on("track", self.counter.consume)
        await pc.setRemoteDescription(RTCSessionDescription(sdp=await request.text(), type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
        key = str(len(self.pcs))
        self.pcs[key] = pc
        return web.Response(
            status=201,
            text=pc.localDescription.sdp,
            content_type="application/sdp",
            headers={"Location": f"/resource/{key}"},
        )

    async def delete(self, request: web.Request) -> web.Response:
        pc = self.pcs.pop(request.match_info["key"], None)
        if pc is not None:
            await pc.close()
        return web.Response(status=200)


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def phase(
    name: str,
    pid: int,
    counter: Counter | None,
    seconds: float,
    http: aiohttp.ClientSession,
    session_url: str,
) -> dict[str, Any]:
    frames0 = counter.frames if counter is not None else 0
    cpu0, t0 = cpu_s(pid), time.monotonic()
    await asyncio.sleep(seconds)
    cpu1, t1 = cpu_s(pid), time.monotonic()
    async with http.get(session_url) as r:
        session = await r.json()
    return {
        "phase": name,
        "gateway_cpu_percent": round(100 * (cpu1 - cpu0) / (t1 - t0), 1),
        "consumer_fps": None if counter is None else round((counter.frames - frames0) / (t1 - t0), 1),
        "encoders": sorted(session["send_bitrate"]),
        "frames_out": session["frames_out"],
    }


async def measure(seconds: float, warmup_s: float) -> dict[str, Any]:
    sink = Sink()
    app = web.Application()
    app.router.add_post("/ingest", sink.post)
    app.router.add_delete("/resource/{key}", sink.delete)
    runner = web.AppRunner(app)
    await runner.setup()
    sink_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", sink_port).start()
    egress = ("--egress-allow", f"http://127.0.0.1:{sink_port}/", "--egress-host", "127.0.0.1")
    args = ("--no-front-process", *egress)
    gateway = EmbeddedGateway(EmbeddedGatewayConfig(processors="none", log_level="error", extra_args=args))
    url = await gateway.start()
    assert gateway.proc is not None
    pid = gateway.proc.pid
    publisher = create_peer_connection(LOOPBACK)
    viewer: RTCPeerConnection | None = None
    phases = []
    try:
        async with aiohttp.ClientSession() as http:
            own = Counter()
            transceiver = publisher.addTransceiver(moving_noise(), direction="sendrecv")
            await publisher.setLocalDescription(await publisher.createOffer())
            async with http.post(f"{url}/whip", data=publisher.localDescription.sdp, headers=SDP) as r:
                assert r.status == 201, await r.text()
                answer, location = await r.text(), r.headers["Location"]
            await publisher.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
            own.consume(transceiver.receiver.track)
            session_url = f"{url}/sessions/{location.rsplit('/', 1)[-1]}"
            await asyncio.sleep(warmup_s)
            phases.append(await phase("publisher only", pid, own, seconds, http, session_url))
            target = {"url": f"http://127.0.0.1:{sink_port}/ingest"}
            async with http.post(f"{session_url}/egress", json=target) as r:
                assert r.status == 201, await r.text()
            await asyncio.sleep(warmup_s)
            phases.append(await phase("+ egress push", pid, sink.counter, seconds, http, session_url))
            async with http.delete(f"{session_url}/egress") as r:
                assert r.status == 200
            viewer = create_peer_connection(LOOPBACK)
            seen = Counter()
            watch = viewer.addTransceiver("video", direction="recvonly")
            await viewer.setLocalDescription(await viewer.createOffer())
            whep = f"{url}/whep/{location.rsplit('/', 1)[-1]}"
            async with http.post(whep, data=viewer.localDescription.sdp, headers=SDP) as r:
                assert r.status == 201, await r.text()
                await viewer.setRemoteDescription(RTCSessionDescription(sdp=await r.text(), type="answer"))
            seen.consume(watch.receiver.track)
            await asyncio.sleep(warmup_s)
            phases.append(await phase("+ WHEP viewer instead", pid, seen, seconds, http, session_url))
    finally:
        if viewer is not None:
            await viewer.close()
        await publisher.close()
        await gateway.stop()
        for pc in sink.pcs.values():
            await pc.close()
        await runner.cleanup()
    return {"seconds": seconds, "resolution": "320x240", "fps": 15, "cpus": os.cpu_count(), "phases": phases}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="each phase's measuring window")
    parser.add_argument("--warmup-s", type=float, default=3.0, help="before each phase")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.seconds, args.warmup_s))
    for p in result["phases"]:
        print(
            f"{p['phase']:24} gateway CPU {p['gateway_cpu_percent']:5.1f} %  consumer "
            f"{p['consumer_fps']} fps  encoders {p['encoders']}"
        )
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
