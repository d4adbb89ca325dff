#!/usr/bin/env python3
"""The design everyone starts from: aiortc's example server running our Pipeline, so that
`bench/vs_stock.py` compares designs and not models.

Stock on purpose: aiortc's receive and its unbounded queue behind a `MediaRelay`; the work in the outgoing
track's `recv()`, one frame at a time, on the event loop (`--mode inline`) or awaited in the default thread
pool (`--mode executor`, the usual first fix); no deadlines, drops, batching or degradation. Face tracking is
the gateway's, so the stock design is not charged for a detection every frame. Added only so the same load
generator can drive it: WHIP signalling, POST /sources, /readyz, /api/stats frame counters, loopback ICE.

    python -m bench.stock_server --port 8090 --mode executor
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
from aiohttp import web
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaRelay

from engines.factory import EngineConfig
from engines.frames import FaceTrack, FrameItem, NoFaceFound, SourceFace
from engines.models.store import ModelStore, default_model_dir
from engines.pipeline import Pipeline, PipelineConfig
from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig

MODES = ("inline", "executor")


@dataclass
class StockState:
    mode: str
    pipeline: Pipeline | None = None
    sources: dict[str, SourceFace] = field(default_factory=dict)
    peers: dict[str, RTCPeerConnection] = field(default_factory=dict)
    received: int = 0
    processed: int = 0
    started: float = field(default_factory=time.monotonic)


STATE = web.AppKey("stock_state", StockState)


class VideoTransformTrack(MediaStreamTrack):
    """The example's transform track: one frame in, processed, one frame out, in `recv()`."""

    kind = "video"

    def __init__(self, track: MediaStreamTrack, state: StockState, source: SourceFace | None) -> None:
        super().__init__()
        self.track = track
        self._state = state
        self._source = source
        self._face_track = FaceTrack()  # one per stream, as the gateway keeps one per session

    async def recv(self) -> av.VideoFrame:
        frame = await self.track.recv()
        assert isinstance(frame, av.VideoFrame)
        state = self._state
        state.received += 1
        pipeline = state.pipeline
        if pipeline is None or self._source is None:
            return frame
        img = frame.to_ndarray(format="rgb24")
        item = FrameItem(image=img, source=self._source, track=self._face_track)
        if state.mode == "inline":
            out = pipeline.process([item])[0]
        else:
            out = (await asyncio.get_running_loop().run_in_executor(None, pipeline.process, [item]))[0]
        new_frame = av.VideoFrame.from_ndarray(out.image, format="rgb24")
        new_frame.pts = frame.pts
        new_frame.time_base = frame.time_base
        state.processed += 1
        return new_frame


async def whip(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if request.content_type != "application/sdp":
        return web.Response(status=415, text="Content-Type must be application/sdp\n")
    source_id = request.query.get("source")
    source = state.sources.get(source_id) if source_id else next(iter(state.sources.values()), None)
    if source_id and source is None:
        return web.Response(status=404, text="no such source\n")
    pc = create_peer_connection(IceConfig.loopback_only(), low_latency_receive=False)
    pc_id = secrets.token_urlsafe(9)
    state.peers[pc_id] = pc
    relay = MediaRelay()

    @pc.on("track")
    def on_track(track: MediaStreamTrack) -> None:
        if track.kind == "video":
            pc.addTrack(VideoTransformTrack(relay.subscribe(track), state, source))

    @pc.on("connectionstatechange")
    async def on_state() -> None:
        if pc.connectionState in ("failed", "closed"):
            await pc.close()
            state.peers.pop(pc_id, None)

    try:
        await pc.setRemoteDescription(RTCSessionDescription(sdp=await request.text(), type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
    except (ValueError, RuntimeError) as exc:
        await pc.close()
        state.peers.pop(pc_id, None)
        return web.Response(status=400, text=f"bad offer: {exc}\n")
    return web.Response(
        status=201,
        text=pc.localDescription.sdp,
        content_type="application/sdp",
        headers={"Location": f"/whip/{pc_id}"},
    )


async def whip_delete(request: web.Request) -> web.Response:
    pc = request.app[STATE].peers.pop(request.match_info["pc_id"], None)
    if pc is None:
        return web.Response(status=404, text="no such session\n")
    await pc.close()
    return web.Response(status=200)


async def post_source(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if state.pipeline is None:
        return web.Response(status=503, text="not ready\n")
    body = await request.read()
    bgr = cv2.imdecode(np.frombuffer(body, dtype=np.uint8), cv2.IMREAD_COLOR) if body else None
    if bgr is None:
        return web.Response(status=415, text="body is not a decodable image\n")
    sid = secrets.token_urlsafe(9)
    try:
        face = await asyncio.get_running_loop().run_in_executor(
            None, state.pipeline.prepare_source, cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), sid
        )
    except NoFaceFound:
        return web.Response(status=422, text="no face found in the image\n")
    state.sources[sid] = face
    return web.json_response({"id": sid, "faces": face.faces}, status=201)


async def readyz(request: web.Request) -> web.Response:
    ready = request.app[STATE].pipeline is not None
    return web.Response(status=200 if ready else 503, text="ready\n" if ready else "loading\n")


async def stats(request: web.Request) -> web.Response:
    """The few /api/stats fields the load generator reads (same names as the gateway's snapshot)."""
    s = request.app[STATE]
    body: dict[str, Any] = {
        "schema_version": 1,
        "uptime_s": time.monotonic() - s.started,
        "frames": {"received": s.received, "processed": s.processed, "dropped": {}},
        "sessions": {"open": len(s.peers)},
        "design": f"stock-{s.mode}",
    }
    return web.json_response(body)


def build_app(mode: str, pipeline_config: PipelineConfig, model_dir: Path) -> web.Application:
    app = web.Application(client_max_size=16 * 1024 * 1024)
    state = StockState(mode)
    app[STATE] = state

    async def load(app: web.Application) -> Any:
        loop = asyncio.get_running_loop()
        store = ModelStore(model_dir)
        pipeline = await loop.run_in_executor(None, Pipeline.from_config, pipeline_config, store)
        await loop.run_in_executor(None, pipeline.warmup)
        state.pipeline = pipeline
        yield
        state.pipeline = None
        pipeline.close()

    async def close_peers(app: web.Application) -> None:
        peers = list(state.peers.values())
        state.peers.clear()
        await asyncio.gather(*(pc.close() for pc in peers), return_exceptions=True)

    app.cleanup_ctx.append(load)
    app.on_shutdown.append(close_peers)
    app.router.add_post("/whip", whip)
    app.router.add_delete("/whip/{pc_id}", whip_delete)
    app.router.add_post("/sources", post_source)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/api/stats", stats)
    return app


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="aiortc example-server design running livefuse's Pipeline")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8090)
    p.add_argument("--mode", choices=MODES, default="executor")
    p.add_argument(
        "--intra-op-threads",
        type=int,
        default=None,
        help="ONNX Runtime threads per engine (default: 1 with the executor, all cores inline)",
    )
    p.add_argument("--model-dir", type=Path, default=None)
    p.add_argument("--swapper", default="mesh_warp")
    args = p.parse_args(argv)
    threads = (
        args.intra_op_threads if args.intra_op_threads is not None else (1 if args.mode == "executor" else 0)
    )
    config = PipelineConfig(
        processors=("face_swapper",),
        swapper=args.swapper,
        engine=EngineConfig(backend="onnxruntime", providers=("cpu",), max_batch=8, intra_op_threads=threads),
    )
    model_dir = args.model_dir or default_model_dir(os.environ)
    web.run_app(
        build_app(args.mode, config, model_dir),
        host=args.host,
        port=args.port,
        print=None,
        handle_signals=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
