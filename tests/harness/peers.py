"""aiortc publishers (WHIP) and viewers (WHEP) on 127.0.0.1. Frames carry their id in pixels
(loadgen.stamp): identity and latency survive the trip through the gateway."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

import aiohttp
import numpy as np
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from av import VideoFrame

from gateway.webrtc.install import create_peer_connection
from loadgen.client import offer_only
from loadgen.stamp import read_stamp
from loadgen.track import StampedVideoTrack
from tests.harness.gateway import LOOPBACK


def read_id(frame: VideoFrame) -> int | None:
    """The stamped frame id, or None where the stamp did not survive (or was never there)."""
    yuv = frame.to_ndarray(format="yuv420p")
    return read_stamp(yuv[: frame.height])


@dataclass
class Received:
    """What a peer got back: every id and latency, every size, and a few decoded frames to look at."""

    ids: list[int] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)
    frames: list[np.ndarray] = field(default_factory=list)
    frame_ids: list[int] = field(default_factory=list)  # the id of each kept frame in `frames`
    sizes: list[tuple[int, int]] = field(default_factory=list)
    answer_headers: dict[str, str] = field(default_factory=dict)  # the WHIP/WHEP answer's
    keep_luma: bool = False  # keep every stamped frame's luma plane in `lumas` (id, plane)
    lumas: list[tuple[int, np.ndarray]] = field(default_factory=list)


async def consume(
    track: MediaStreamTrack, sent: dict[int, float] | None, into: Received, keep: int = 5
) -> None:
    """Reads `track` until it ends or the task is cancelled; keeps the last `keep` frames and every tenth."""
    with contextlib.suppress(MediaStreamError, asyncio.CancelledError):
        while True:
            frame: VideoFrame = await track.recv()  # type: ignore[assignment]
            now = time.monotonic()
            fid = read_id(frame)
            into.sizes.append((frame.width, frame.height))
            if fid is None:
                continue
            into.ids.append(fid)
            if into.keep_luma:
                into.lumas.append((fid, frame.to_ndarray(format="yuv420p")[: frame.height].copy()))
            if sent is not None and fid in sent:
                into.latency_s.append(now - sent[fid])
            if len(into.frames) < keep or fid % 10 == 0:
                into.frames.append(frame.to_ndarray(format="rgb24"))
                into.frame_ids.append(fid)
                into.frames = into.frames[-keep:]
                into.frame_ids = into.frame_ids[-keep:]


@dataclass
class Client:
    """A publisher or viewer: its connection, its WHIP/WHEP resource and what it received."""

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


async def negotiate(
    http: aiohttp.ClientSession,
    url: str,
    pc: RTCPeerConnection,
    headers: dict[str, str] | None,
    answer_headers: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    """The WHIP/WHEP exchange (non-trickle): (status, body, Location); the answer applied on a 201 (its
    headers copied into `answer_headers` where given)."""
    await pc.setLocalDescription(await pc.createOffer())
    async with http.post(
        url, data=pc.localDescription.sdp, headers={"Content-Type": "application/sdp", **(headers or {})}
    ) as resp:
        body = await resp.text()
        if resp.status != 201:
            return resp.status, body, ""
        await pc.setRemoteDescription(RTCSessionDescription(sdp=body, type="answer"))
        if answer_headers is not None:
            answer_headers.update(resp.headers)
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
    status, body, location = await negotiate(
        http, f"{base}/whip{query}", pc, headers, received.answer_headers
    )
    if status != 201:
        await Client(pc, "", received, track, tasks).close()
        raise AssertionError(f"WHIP POST -> {status}: {body}")
    # aiortc creates the receiver's track in setRemoteDescription
    tasks.append(asyncio.ensure_future(consume(transceiver.receiver.track, track.sent, received)))
    return Client(pc, location, received, track, tasks)


async def view(
    http: aiohttp.ClientSession,
    base: str,
    session_id: str,
    sent: dict[int, float] | None,
    keep_luma: bool = False,
) -> Client:
    """A WHEP viewer; `keep_luma`: keep every frame's luma (`Received.lumas`)."""
    pc = create_peer_connection(LOOPBACK)
    transceiver = pc.addTransceiver("video", direction="recvonly")
    received = Received(keep_luma=keep_luma)
    tasks: list[asyncio.Task[None]] = []
    status, body, location = await negotiate(
        http, f"{base}/whep/{session_id}", pc, None, received.answer_headers
    )
    if status != 201:
        await Client(pc, "", received, None, tasks).close()
        raise AssertionError(f"WHEP POST -> {status}: {body}")
    tasks.append(asyncio.ensure_future(consume(transceiver.receiver.track, sent, received)))
    return Client(pc, location, received, None, tasks)
