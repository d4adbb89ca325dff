"""Round-trip latency through a real gateway process, from stamped frames sent and received back.

N aiortc publishers on 127.0.0.1 time each frame from when our track hands it to aiortc's encoder until its
decoded processed copy comes back on the same connection. Cases: `passthrough` (?processors=none: the media
path alone) and `face` (face_swapper, the astronaut as source), each for N = 1 and 4. The gateway runs as its
own process so its event loop is not shared with the clients'. Prints p50/p95 per case and writes JSON
(default reports/bench_roundtrip.json). Not a test.

    .venv/bin/python -m bench.roundtrip [--duration 20] [--cases passthrough,face] [--sessions 1,4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import cv2
import numpy as np
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from av import VideoFrame

from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig
from loadgen.embedded import EmbeddedGateway, EmbeddedGatewayConfig
from loadgen.media import default_media_dir
from loadgen.percentiles import Statistic, summary
from loadgen.stamp import read_stamp
from loadgen.track import StampedVideoTrack

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    name: str
    size: tuple[int, int]
    processors: str  # the WHIP ?processors= value
    with_source: bool


CASES = {
    "passthrough": Case("passthrough", (640, 360), "none", False),
    "face": Case("face", (320, 240), "face_swapper", True),
}


@dataclass
class Publisher:
    pc: RTCPeerConnection
    track: StampedVideoTrack
    latencies: list[tuple[float, float]] = field(default_factory=list)  # (receive time, latency s)
    received: int = 0
    task: asyncio.Task[None] | None = None


async def _consume(track: MediaStreamTrack, pub: Publisher) -> None:
    with contextlib.suppress(MediaStreamError, asyncio.CancelledError):
        while True:
            frame: VideoFrame = await track.recv()  # type: ignore[assignment]
            now = time.monotonic()
            fid = read_stamp(frame.to_ndarray(format="yuv420p")[: frame.height])
            pub.received += 1
            if fid is not None and fid in pub.track.sent:
                pub.latencies.append((now, now - pub.track.sent[fid]))


async def _publish(http: aiohttp.ClientSession, url: str, image: np.ndarray, fps: float) -> Publisher:
    pc = create_peer_connection(IceConfig.loopback_only())
    track = StampedVideoTrack.from_rgb([image], fps)
    transceiver = pc.addTransceiver(track, direction="sendrecv")
    await pc.setLocalDescription(await pc.createOffer())
    async with http.post(url, data=pc.localDescription.sdp, headers={"Content-Type": "application/sdp"}) as r:
        body = await r.text()
        if r.status != 201:
            await pc.close()
            raise RuntimeError(f"WHIP {r.status}: {body.strip()}")
    await pc.setRemoteDescription(RTCSessionDescription(sdp=body, type="answer"))
    pub = Publisher(pc, track)
    pub.task = asyncio.ensure_future(_consume(transceiver.receiver.track, pub))
    return pub


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"count": 0}
    fields: dict[str, Statistic] = {
        "p50_ms": 50,
        "p95_ms": 95,
        "p99_ms": 99,
        "mean_ms": "mean",
        "max_ms": "max",
    }
    return {"count": len(values), **summary(np.asarray(values) * 1000.0, fields, 2)}


def _image(case: Case, media: Path) -> np.ndarray:
    bgr = cv2.imread(str(media / "astronaut.png"), cv2.IMREAD_COLOR)
    if bgr is None:
        raise SystemExit(f"bench_roundtrip: {media / 'astronaut.png'} missing: run `make provision`")
    w, h = case.size
    canvas = np.full((h, w, 3), 60, np.uint8)
    face = cv2.resize(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), (h * 4 // 5, h * 4 // 5))
    x0 = (w - face.shape[1]) // 2
    canvas[: face.shape[0], x0 : x0 + face.shape[1]] = face
    return canvas


async def run_case(
    case: Case, sessions: int, fps: float, warmup: float, duration: float, media: Path
) -> dict[str, Any]:
    gateway = EmbeddedGateway(EmbeddedGatewayConfig(max_sessions=max(16, sessions)), cwd=ROOT)
    image = _image(case, media)
    pubs: list[Publisher] = []
    try:
        base = await gateway.start()
        async with aiohttp.ClientSession() as http:
            query = f"?processors={case.processors}"
            if case.with_source:
                ok, png = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
                async with http.post(
                    base + "/sources", data=png.tobytes(), headers={"Content-Type": "image/png"}
                ) as r:
                    if r.status != 201:
                        raise RuntimeError(f"source upload {r.status}: {await r.text()}")
                    query += "&source=" + (await r.json())["id"]
            for _ in range(sessions):
                pubs.append(await _publish(http, base + "/whip" + query, image, fps))
            t0 = time.monotonic()
            await asyncio.sleep(warmup + duration)
            measure_from = t0 + warmup
            async with http.get(base + "/api/stats") as r:
                server = await r.json() if r.status == 200 else {}
    finally:
        for pub in pubs:
            pub.track.stop()
            if pub.task is not None:
                pub.task.cancel()
        await asyncio.gather(*(p.pc.close() for p in pubs), return_exceptions=True)
        await gateway.stop()
    lat = [lt for p in pubs for (at, lt) in p.latencies if at >= measure_from]
    sent = sum(sum(1 for t in p.track.sent.values() if t >= measure_from) for p in pubs)
    got = len(lat)
    stages = server.get("latency", {}).get("stages_ms", {})
    return {
        "case": case.name,
        "sessions": sessions,
        "size": f"{case.size[0]}x{case.size[1]}",
        "fps": fps,
        "processors": case.processors,
        "duration_s": duration,
        "frames_sent": sent,
        "frames_back": got,
        "delivered": round(got / sent, 3) if sent else 0.0,
        "roundtrip": _percentiles(lat),
        "server_ms": server.get("latency", {}).get("server_ms"),
        "server_stages_p50_ms": {k: v.get("p50") for k, v in stages.items()},
        "cpu_percent": server.get("system", {}).get("cpu_percent"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--cases", default="passthrough,face")
    p.add_argument("--sessions", default="1,4")
    p.add_argument("--fps", type=float, default=15.0)
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--output", type=Path, help="write the JSON report here (default: none, printed only)")
    p.add_argument("--out", dest="output", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    media = default_media_dir(os.environ)
    results = []
    for name in args.cases.split(","):
        for n in (int(x) for x in args.sessions.split(",")):
            res = asyncio.run(run_case(CASES[name], n, args.fps, args.warmup, args.duration, media))
            results.append(res)
            rt = res["roundtrip"]
            print(
                f"{name:12s} N={n} {res['size']:>8s}@{args.fps:g}: p50 {rt.get('p50_ms', '-')} ms, "
                f"p95 {rt.get('p95_ms', '-')} ms, p99 {rt.get('p99_ms', '-')} ms, "
                f"delivered {res['delivered']:.0%} ({res['frames_back']}/{res['frames_sent']}), "
                f"server p50 {(res['server_ms'] or {}).get('p50', '-')} ms",
                flush=True,
            )
    report = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "targets_passthrough_ms": {"p50": 15, "p95": 30},
        "results": results,
    }
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2))
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
