"""CPU cost of the audio relay in a real gateway process: per relayed audio stream and per audio viewer.

The gateway runs as its own process (`--processors none`) and its CPU time is read over a steady window. P
aiortc publishers send a small video with or without an Opus track, each session with V WHEP viewers:

    per audio stream = (cpu[audio, V=0] - cpu[video, V=0]) / P
    per audio viewer = ((cpu[audio, V] - cpu[audio, 0]) - (cpu[video, V] - cpu[video, 0])) / (P * V)

in % of one core; a table and JSON (reports/bench_audio.json). Run it alone (under
`flock /tmp/livefuse-bench.lock`): other load shows up as noise in the differences.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

from bench.probes import process_cpu_s
from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig
from loadgen.avsync import ClickAudioTrack, MediaClock
from loadgen.embedded import EmbeddedGateway, EmbeddedGatewayConfig
from loadgen.track import StampedVideoTrack

ROOT = Path(__file__).resolve().parents[1]

FPS = 5.0
LOOPBACK = IceConfig.loopback_only()


def small_video(clock: MediaClock) -> StampedVideoTrack:
    """160x120 of still noise, unstamped, on the publisher's clock (shared with its audio). Small and slow
    (`FPS`) so the video's own cost and noise stay low beside the audio's."""
    picture = np.random.default_rng(0).integers(0, 255, (120, 160, 3), dtype=np.uint8)
    return StampedVideoTrack.from_rgb([picture], FPS, clock=clock, stamp=False)


async def _offer(http: aiohttp.ClientSession, url: str, pc: RTCPeerConnection) -> str:
    await pc.setLocalDescription(await pc.createOffer())
    async with http.post(url, data=pc.localDescription.sdp, headers={"Content-Type": "application/sdp"}) as r:
        body = await r.text()
        if r.status != 201:
            raise RuntimeError(f"{url} -> {r.status}: {body[:200]}")
        await pc.setRemoteDescription(RTCSessionDescription(sdp=body, type="answer"))
        return r.headers["Location"]


async def _drain(track: MediaStreamTrack) -> None:
    with contextlib.suppress(MediaStreamError, asyncio.CancelledError):
        while True:
            await track.recv()


async def run_case(
    base: str, pid: int, publishers: int, viewers: int, audio: bool, warmup: float, duration: float
) -> dict[str, Any]:
    pcs: list[RTCPeerConnection] = []
    tasks: list[asyncio.Task[None]] = []
    async with aiohttp.ClientSession() as http:
        try:
            for _ in range(publishers):
                clock = MediaClock()
                pc = create_peer_connection(LOOPBACK)
                pcs.append(pc)
                pc.addTransceiver(small_video(clock), direction="sendonly")
                if audio:
                    pc.addTransceiver(ClickAudioTrack(clock), direction="sendonly")
                location = await _offer(http, f"{base}/whip?processors=none", pc)
                session_id = location.rsplit("/", 1)[-1]
                for _ in range(viewers):
                    vpc = create_peer_connection(LOOPBACK)
                    pcs.append(vpc)
                    kinds = ("video", "audio") if audio else ("video",)
                    receivers = [vpc.addTransceiver(k, direction="recvonly").receiver for k in kinds]
                    await _offer(http, f"{base}/whep/{session_id}", vpc)
                    tasks += [asyncio.ensure_future(_drain(r.track)) for r in receivers]
            await asyncio.sleep(warmup)
            c0, t0 = process_cpu_s(pid), time.monotonic()
            await asyncio.sleep(duration)
            c1, t1 = process_cpu_s(pid), time.monotonic()
            async with http.get(f"{base}/sessions") as r:
                sessions = await r.json() if r.status == 200 else None
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for pc in pcs:
                await pc.close()
    relayed = None
    if isinstance(sessions, dict):
        items = sessions.get("sessions", [])
        relayed = sum(int(s.get("audio", {}).get("audio_packets_relayed", 0)) for s in items)
    return {
        "publishers": publishers,
        "viewers_per_session": viewers,
        "audio": audio,
        "cpu_pct": round(100.0 * (c1 - c0) / (t1 - t0), 2),
        "audio_packets_relayed": relayed,
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    config = EmbeddedGatewayConfig(processors="none", log_level="warning", degradation=False)
    cases: dict[str, dict[str, Any]] = {}
    async with EmbeddedGateway(config, cwd=ROOT) as gw:
        assert gw.proc is not None
        pid = gw.proc.pid
        for audio in (False, True):
            for viewers in (0, args.viewers):
                name = f"{'audio' if audio else 'video'}_v{viewers}"
                cases[name] = await run_case(
                    gw.url, pid, args.publishers, viewers, audio, args.warmup, args.duration
                )
                print(f"{name:10s} gateway CPU {cases[name]['cpu_pct']:6.2f} % of a core", flush=True)
                await asyncio.sleep(2.0)  # let the closed sessions go
    p, v = args.publishers, args.viewers
    per_stream = (cases["audio_v0"]["cpu_pct"] - cases["video_v0"]["cpu_pct"]) / p
    per_viewer = (
        (cases[f"audio_v{v}"]["cpu_pct"] - cases["audio_v0"]["cpu_pct"])
        - (cases[f"video_v{v}"]["cpu_pct"] - cases["video_v0"]["cpu_pct"])
    ) / (p * v)
    return {
        "cases": cases,
        "per_audio_stream_cpu_pct": round(per_stream, 3),
        "per_audio_viewer_cpu_pct": round(per_viewer, 3),
        "publishers": p,
        "viewers_per_session": v,
        "duration_s": args.duration,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--publishers", type=int, default=4)
    parser.add_argument("--viewers", type=int, default=4)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=4.0)
    parser.add_argument(
        "--output", type=Path, help="write the JSON report here (default: none, printed only)"
    )
    parser.add_argument("--out", dest="output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    print(
        f"per relayed audio stream: {result['per_audio_stream_cpu_pct']:.3f} % of a core; "
        f"per audio viewer: {result['per_audio_viewer_cpu_pct']:.3f} %"
    )
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2))
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
