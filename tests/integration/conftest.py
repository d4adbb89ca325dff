"""Helpers for integration tests: a gateway on 127.0.0.1 (free port) and aiortc publishers/viewers
that gather ICE on 127.0.0.1 only. Frames carry their id in pixels (loadgen.stamp):
identity survives the trip."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import numpy as np
from aiohttp import web
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from av import VideoFrame

from engines.frames import FrameItem, FrameOptions, FrameOutput, SourceFace
from gateway.app import create_app, wait_started
from gateway.config import GatewayConfig, SessionConfig
from gateway.monitoring.null import NullMonitor
from gateway.monitoring.records import FrameRecord, LinkState
from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig
from loadgen.client import offer_only
from loadgen.embedded import start_site
from loadgen.stamp import read_stamp
from loadgen.track import StampedVideoTrack

LOOPBACK = IceConfig.loopback_only()


def gw_config(**sessions: Any) -> GatewayConfig:
    return GatewayConfig(host="127.0.0.1", port=0, ice=LOOPBACK, sessions=SessionConfig(**sessions))


@dataclass
class Gateway:
    app: web.Application
    runner: web.AppRunner
    url: str

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_gateway(config: GatewayConfig, *, wait_ready: bool = True, **kwargs: Any) -> Gateway:
    """Listening on a free port; by default also waits for the background start-up (models warm)."""
    app = create_app(config, **kwargs)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    port = await start_site(runner)
    if wait_ready:
        try:
            await wait_started(app, 60)
        except BaseException:
            await runner.cleanup()
            raise
    return Gateway(app, runner, f"http://127.0.0.1:{port}")


@contextlib.asynccontextmanager
async def running_gateway(config: GatewayConfig, **kwargs: Any) -> AsyncIterator[Gateway]:
    gw = await start_gateway(config, **kwargs)
    try:
        yield gw
    finally:
        await gw.stop()


def read_id(frame: VideoFrame) -> int | None:
    yuv = frame.to_ndarray(format="yuv420p")
    return read_stamp(yuv[: frame.height])


def busy_pictures(image: np.ndarray) -> list[np.ndarray]:
    """A picture that pans and carries fine noise: every frame costs the encoder its whole budget, so what it
    sends follows its target even when a slow machine delivers fewer frames (a still picture's inter frames
    are a few hundred bytes and would never fill a queue)."""
    rng = np.random.default_rng(5)
    out = []
    for k in range(8):
        noisy = np.roll(image, 8 * k, axis=1).astype(np.int16) + rng.integers(-24, 25, image.shape)
        out.append(np.clip(noisy, 0, 255).astype(np.uint8))
    return out


@dataclass
class Received:
    ids: list[int] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)
    frames: list[np.ndarray] = field(default_factory=list)
    frame_ids: list[int] = field(default_factory=list)  # the id of each kept frame in `frames`
    sizes: list[tuple[int, int]] = field(default_factory=list)


async def consume(
    track: MediaStreamTrack, sent: dict[int, float] | None, into: Received, keep: int = 5
) -> None:
    with contextlib.suppress(MediaStreamError, asyncio.CancelledError):
        while True:
            frame: VideoFrame = await track.recv()  # type: ignore[assignment]
            now = time.monotonic()
            fid = read_id(frame)
            into.sizes.append((frame.width, frame.height))
            if fid is None:
                continue
            into.ids.append(fid)
            if sent is not None and fid in sent:
                into.latency_s.append(now - sent[fid])
            if len(into.frames) < keep or fid % 10 == 0:
                into.frames.append(frame.to_ndarray(format="rgb24"))
                into.frame_ids.append(fid)
                into.frames = into.frames[-keep:]
                into.frame_ids = into.frame_ids[-keep:]


@dataclass
class Client:
    pc: RTCPeerConnection
    location: str
    received: Received
    sender_track: StampedVideoTrack | None
    tasks: list[asyncio.Task[None]]

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.sender_track is not None:
            self.sender_track.stop()
        await self.pc.close()


async def _negotiate(
    http: aiohttp.ClientSession, url: str, pc: RTCPeerConnection, headers: dict[str, str] | None
) -> tuple[int, str, str]:
    await pc.setLocalDescription(await pc.createOffer())
    async with http.post(
        url, data=pc.localDescription.sdp, headers={"Content-Type": "application/sdp", **(headers or {})}
    ) as resp:
        body = await resp.text()
        if resp.status != 201:
            return resp.status, body, ""
        await pc.setRemoteDescription(RTCSessionDescription(sdp=body, type="answer"))
        return resp.status, body, resp.headers["Location"]


async def source_query(http: aiohttp.ClientSession, base: str, image_rgb: np.ndarray) -> str:
    """Upload a source face (POST /sources) and return the WHIP query that selects it. Frames of a session
    without a source face skip the batcher (nothing to swap), so tests of the batched path need one."""
    import cv2

    ok, png = cv2.imencode(".png", cv2.cvtColor(image_rgb, cv2.COLOR_RGB2BGR))
    assert ok
    async with http.post(f"{base}/sources", data=png.tobytes(), headers={"Content-Type": "image/png"}) as r:
        assert r.status == 201, await r.text()
        return f"?source={(await r.json())['id']}"


async def publish(
    http: aiohttp.ClientSession,
    base: str,
    images: list[np.ndarray],
    *,
    fps: float = 15.0,
    query: str = "",
    headers: dict[str, str] | None = None,
    codec: str | None = None,
) -> Client:
    """A WHIP publisher; `codec` ("VP8" / "H264") restricts what it offers, as e.g. OBS offers H.264 only."""
    pc = create_peer_connection(LOOPBACK)
    track = StampedVideoTrack.from_rgb(images, fps)
    transceiver = pc.addTransceiver(track, direction="sendrecv")
    if codec is not None:
        offer_only(transceiver, codec)
    received = Received()
    tasks: list[asyncio.Task[None]] = []
    status, body, location = await _negotiate(http, f"{base}/whip{query}", pc, headers)
    if status != 201:
        await Client(pc, "", received, track, tasks).close()
        raise AssertionError(f"WHIP POST -> {status}: {body}")
    # aiortc creates the receiver's track in setRemoteDescription
    tasks.append(asyncio.ensure_future(consume(transceiver.receiver.track, track.sent, received)))
    return Client(pc, location, received, track, tasks)


async def view(
    http: aiohttp.ClientSession, base: str, session_id: str, sent: dict[int, float] | None
) -> Client:
    pc = create_peer_connection(LOOPBACK)
    transceiver = pc.addTransceiver("video", direction="recvonly")
    received = Received()
    tasks: list[asyncio.Task[None]] = []
    status, body, location = await _negotiate(http, f"{base}/whep/{session_id}", pc, None)
    if status != 201:
        await Client(pc, "", received, None, tasks).close()
        raise AssertionError(f"WHEP POST -> {status}: {body}")
    tasks.append(asyncio.ensure_future(consume(transceiver.receiver.track, sent, received)))
    return Client(pc, location, received, None, tasks)


async def wait_for(cond: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        await asyncio.sleep(step)
    return cond()


class FakePipeline:
    """Marks each frame's top-left block (processed vs pass-through is visible); optional delay."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.batches: list[int] = []
        self.closed = False

    def prepare_source(self, image_rgb: np.ndarray, source_id: str) -> SourceFace:
        from engines.frames import NoFaceFound

        if float(image_rgb.std()) < 1.0:
            raise NoFaceFound("flat image")
        return SourceFace(id=source_id, image=image_rgb, faces=1)

    def process(self, items: list[FrameItem]) -> list[FrameOutput]:
        self.batches.append(len(items))
        if self.delay_s:
            time.sleep(self.delay_s)
        outs = []
        for item in items:
            img = item.image.copy()
            img[: img.shape[0] // 4, : img.shape[1] // 4] = (255, 0, 255)
            outs.append(
                FrameOutput(
                    image=img,
                    faces=1,
                    timings_ms={"face_swapper": 1.0},
                    batch_sizes={"face_swapper": len(items)},
                )
            )
        return outs

    def warmup(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def not_ready_engines(self) -> list[str]:
        return []


class RecordingMonitor(NullMonitor):
    """Collects what the gateway reports (the real Monitor is tested by its owner)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[FrameRecord] = []
        self.opened: list[str] = []
        self.closed_sessions: list[tuple[str, str]] = []
        self.rejects: list[str] = []
        self.links: list[tuple[str, LinkState]] = []
        self.events: list[tuple[str, str, dict[str, Any]]] = []  # kind, message, data

    def record_frame(self, rec: FrameRecord) -> None:
        self.records.append(rec)

    def session_opened(self, session_id: str, info: dict[str, object]) -> None:
        self.opened.append(session_id)

    def session_closed(self, session_id: str, reason: str) -> None:
        self.closed_sessions.append((session_id, reason))

    def session_link(self, session_id: str, link: LinkState) -> None:
        self.links.append((session_id, link))

    def record_reject(self, reason: str) -> None:
        self.rejects.append(reason)

    def event(self, kind: str, message: str, **data: Any) -> None:
        self.events.append((kind, message, data))

    def frame_options(self, requested: tuple[str, ...]) -> FrameOptions:
        return FrameOptions(processors=requested)

    def admits_new_sessions(self) -> bool:
        return True

    def session_stats(self, session_id: str) -> dict[str, Any]:
        mine = [r for r in self.records if r.session_id == session_id]
        return {"frames": len(mine)}


def with_sessions(config: GatewayConfig, **changes: Any) -> GatewayConfig:
    return replace(config, sessions=replace(config.sessions, **changes))
