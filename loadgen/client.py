"""One load-generator job: a real aiortc WHIP publisher that sends stamped frames, reads the processed ones.

A frame is sent when the sending track's `recv()` hands it to aiortc's encoder, and received when the
processed frame coming back on the same connection is decoded and returned by our receiving track. Both ends
use the marker-release receive (gateway.webrtc.recovery.jitter_buffer), so no client-side frame interval is
added, and both gather ICE on 127.0.0.1 only when the gateway is on loopback. aiortc runs the codecs in
executors; the sender's per-frame work is a copy of a precomputed frame plus its stamp (loadgen.synth).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode, urljoin, urlparse

import aiohttp
import av
import numpy as np
from aiortc import (
    MediaStreamTrack,
    RTCPeerConnection,
    RTCRtpSender,
    RTCRtpTransceiver,
    RTCSessionDescription,
)

from gateway.webrtc.compat import negotiated_codecs
from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig
from loadgen.avsync import (
    AUDIO_RATE,
    AvSyncProbe,
    ClickAudioTrack,
    MediaClock,
    stamp_capture_reports,
)
from loadgen.fidelity import median_block_psnr
from loadgen.impair import Impairment, impair_peer_connection
from loadgen.publisher_encoder import use_publisher_encoder
from loadgen.stamp import BandGeometry, read_stamp
from loadgen.stats import AvOffset, Event, FrameReceived, FrameSent, JobJoined, JobMark
from loadgen.synth import FrameLoop
from loadgen.track import VIDEO_CLOCK, StampedVideoTrack
from loadgen.transport_cc import offer_with_transport_cc, receive_with_transport_cc


class JoinError(RuntimeError):
    """The gateway refused or failed the WHIP exchange (the message says how)."""


@dataclass(frozen=True)
class ClientConfig:
    url: str  # gateway base URL, e.g. http://127.0.0.1:8080
    token: str | None = None
    whip_path: str = "/whip"
    connect_timeout_s: float = 20.0
    loopback_only: bool | None = None  # None: decide from the URL's host
    source_id: str | None = None  # ?source= (a face uploaded with POST /sources); None: gateway default
    processors: str | None = None  # ?processors=face_swapper,face_enhancer; None: gateway default
    audio: bool = False  # also send Opus (clicks) and measure A/V sync at a WHEP viewer
    network: Impairment | None = None  # impair this job's link, both directions (loadgen.impair)
    picture_quality: bool = False  # measure each received frame's fidelity (loadgen.fidelity)
    transport_cc: bool = False  # offer transport-cc and send its feedback, as browsers do
    codec: str | None = None  # "VP8" / "H264": offer only this video codec (None: aiortc's list)
    # libvpx's temporal denoiser in the publisher's VP8 encoder: 0 = off (the stamp measures the gateway
    # alone), 4 = aiortc's and libwebrtc's x86 setting (loadgen.publisher_encoder)
    publisher_denoiser: int = 0

    def whip_url(self) -> str:
        base = urljoin(self.url.rstrip("/") + "/", self.whip_path.lstrip("/"))
        query = {k: v for k, v in (("source", self.source_id), ("processors", self.processors)) if v}
        return f"{base}?{urlencode(query)}" if query else base

    def ice(self) -> IceConfig:
        loop_only = self.loopback_only if self.loopback_only is not None else is_loopback_url(self.url)
        return IceConfig.loopback_only() if loop_only else IceConfig()

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def offer_only(transceiver: RTCRtpTransceiver, codec: str) -> None:
    """Offer only `codec` ("VP8", "H264") and its RTX on this video transceiver, as e.g. OBS offers H.264
    only."""
    wanted = (f"video/{codec.lower()}", "video/rtx")
    caps = RTCRtpSender.getCapabilities("video").codecs
    transceiver.setCodecPreferences([c for c in caps if c.mimeType.lower() in wanted])


def is_loopback_url(url: str) -> bool:
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def luma_of(frame: av.VideoFrame) -> np.ndarray:
    """The Y plane without a colour conversion (decoded VP8/H.264 is planar YUV; fall back otherwise)."""
    if frame.format.name in ("yuv420p", "yuvj420p", "yuv422p", "yuv444p", "nv12"):
        plane = frame.planes[0]
        arr = np.frombuffer(memoryview(plane), np.uint8).reshape(plane.height, plane.line_size)
        return arr[:, : frame.width]
    return frame.to_ndarray(format="gray")


async def upload_source(http: aiohttp.ClientSession, config: ClientConfig, image: Path) -> str:
    """POST /sources with a face image; returns its id (JoinError with the gateway's reason otherwise).

    Without a source face the gateway has nothing to swap and would pass frames through: the run would
    measure transport, not processing.
    """
    ctype = "image/png" if image.suffix.lower() == ".png" else "image/jpeg"
    url = urljoin(config.url.rstrip("/") + "/", "sources")
    async with http.post(
        url,
        data=image.read_bytes(),
        headers={"Content-Type": ctype, **config.headers()},
        timeout=aiohttp.ClientTimeout(total=60),
    ) as r:
        body = await r.text()
        if r.status != 201:
            raise JoinError(f"POST /sources {r.status}: {body.strip()[:200]}")
        try:
            data = json.loads(body)
        except ValueError:
            raise JoinError("POST /sources: answer is not JSON") from None
    sid = data.get("id") if isinstance(data, dict) else None
    if not isinstance(sid, str):
        raise JoinError("POST /sources: answer has no id")
    return sid


class WhipJob:
    """Publish, receive, measure. `start()` joins (raises JoinError), `stop()` leaves; both idempotent-ish."""

    def __init__(
        self,
        job: int,
        config: ClientConfig,
        loop: FrameLoop,
        fps: float,
        emit: Callable[[Event], None],
        session: aiohttp.ClientSession,
    ) -> None:
        self.job = job
        self.config = config
        self._loop = loop
        self._content_rows = BandGeometry.for_size(loop.width, loop.height).top  # above the stamp band
        self._fps = fps
        self._emit = emit
        self._http = session
        self._pc: RTCPeerConnection | None = None
        self._location: str | None = None
        self._reader: asyncio.Task[None] | None = None
        self._closed = False
        self._viewer: RTCPeerConnection | None = None
        self._viewer_reader: asyncio.Task[None] | None = None
        self._feedback: asyncio.Task[None] | None = None  # --transport-cc: the feedback loop
        self.av_probe: AvSyncProbe | None = None
        self.received_tracks = 0
        self._posted: dict[str, float] = {}  # when each POST went out: "whip", "whep" (the way on air)

    def _mark(self, name: str, since: str = "whip") -> None:
        posted = self._posted.get(since)
        if posted is not None:
            self._emit(JobMark(self.job, name, round((time.monotonic() - posted) * 1000.0, 1)))

    async def start(self) -> None:
        try:
            await asyncio.wait_for(self._join(), timeout=self.config.connect_timeout_s)
        except (JoinError, TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
            detail = "timed out" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
            self._emit(JobJoined(self.job, time.monotonic(), False, detail))
            await self.stop()
            raise JoinError(detail) from exc
        self._emit(JobJoined(self.job, time.monotonic(), True))

    async def _join(self) -> None:
        pc = create_peer_connection(self.config.ice())
        self._pc = pc
        if self.config.network is not None:
            impair_peer_connection(pc, self.config.network, seed=self.job)
        clock = MediaClock() if self.config.audio else None
        job = self.job
        track = StampedVideoTrack(
            self._loop,
            self._fps,
            clock=clock,
            first_id=1,
            on_sent=lambda frame_id, at: self._emit(FrameSent(job, frame_id, at)),
        )
        video = pc.addTransceiver(track, direction="sendrecv")
        if self.config.codec is not None:  # the gateway answers in kind
            offer_only(video, self.config.codec)
        if clock is not None:
            audio_sender = pc.addTrack(ClickAudioTrack(clock))
            # capture-time sender reports on both tracks, as a browser sends them
            stamp_capture_reports(video.sender, clock, VIDEO_CLOCK)
            stamp_capture_reports(audio_sender, clock, AUDIO_RATE)

        @pc.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            if track.kind == "video" and self._reader is None:
                self.received_tracks += 1
                self._reader = asyncio.ensure_future(self._read(track))

        @pc.on("connectionstatechange")
        def on_state() -> None:
            if pc.connectionState == "connected":
                self._mark("connected")

        await pc.setLocalDescription(await pc.createOffer())
        headers = {"Content-Type": "application/sdp", **self.config.headers()}
        offer = pc.localDescription.sdp
        if self.config.transport_cc:
            offer = offer_with_transport_cc(offer)
        self._posted["whip"] = time.monotonic()
        async with self._http.post(self.config.whip_url(), data=offer, headers=headers) as r:
            body = await r.text()
            self._mark("answer")
            if r.status != 201:
                raise JoinError(f"WHIP POST {r.status}: {body.strip()[:200]}")
            location = r.headers.get("Location")
            if not location:
                raise JoinError("WHIP 201 without a Location header")
            self._location = urljoin(self.config.whip_url(), location)
        await pc.setRemoteDescription(RTCSessionDescription(sdp=body, type="answer"))
        codecs = negotiated_codecs(video)
        if codecs:  # the sender makes its encoder on its first frame, after DTLS
            use_publisher_encoder(video.sender, codecs[0].mimeType, self.config.publisher_denoiser)
        if self.config.transport_cc:
            feedback = receive_with_transport_cc(pc, body)
            if feedback is None:
                raise JoinError("--transport-cc: the gateway did not answer transport-cc")
            self._feedback = asyncio.ensure_future(feedback.run())
        if self.config.audio:
            await self._watch_sync()

    async def _watch_sync(self) -> None:
        """A WHEP viewer of this job's session with audio + video, measuring lip sync (loadgen.avsync). The
        processed stream is encoded once per session, so this viewer costs the gateway packetization only."""
        assert self._location is not None
        session_id = self._location.rstrip("/").rsplit("/", 1)[-1]
        url = urljoin(self.config.url.rstrip("/") + "/", f"whep/{session_id}")
        pc = create_peer_connection(self.config.ice())
        self._viewer = pc
        video = pc.addTransceiver("video", direction="recvonly")
        audio = pc.addTransceiver("audio", direction="recvonly")
        probe = AvSyncProbe(fps=self._fps, first_frame_id=1)
        probe.on_offset = lambda ms: self._emit(AvOffset(self.job, time.monotonic(), ms))
        probe.attach(audio.receiver, video.receiver)
        self.av_probe = probe
        await pc.setLocalDescription(await pc.createOffer())
        headers = {"Content-Type": "application/sdp", **self.config.headers()}
        self._posted["whep"] = time.monotonic()
        async with self._http.post(url, data=pc.localDescription.sdp, headers=headers) as r:
            body = await r.text()
            if r.status != 201:
                raise JoinError(f"WHEP POST {r.status}: {body.strip()[:200]}")
        await pc.setRemoteDescription(RTCSessionDescription(sdp=body, type="answer"))
        self._viewer_reader = asyncio.ensure_future(self._read_viewer(video.receiver.track, probe))

    async def _read_viewer(self, track: MediaStreamTrack, probe: AvSyncProbe) -> None:
        first = False
        while True:
            try:
                frame = await track.recv()
            except Exception:  # MediaStreamError when the connection ends
                return
            if isinstance(frame, av.VideoFrame):
                if not first:
                    first = True
                    self._mark("viewer_first_decoded", since="whep")
                probe.on_video_frame(read_stamp(luma_of(frame)), frame.pts)

    async def _read(self, track: MediaStreamTrack) -> None:
        first = False
        while True:
            try:
                frame = await track.recv()
            except Exception:  # MediaStreamError when the connection ends; nothing more will come
                return
            t = time.monotonic()
            if isinstance(frame, av.VideoFrame):
                if not first:
                    first = True
                    self._mark("first_decoded")
                luma = luma_of(frame)
                frame_id = read_stamp(luma)
                psnr = self._fidelity(luma, frame_id) if self.config.picture_quality else None
                self._emit(FrameReceived(self.job, frame_id, t, psnr))

    def _fidelity(self, luma: np.ndarray, frame_id: int | None) -> float | None:
        """The received picture against the one sent with this id, above the stamp band."""
        if frame_id is None:
            return None
        loop = self._loop
        return median_block_psnr(luma, loop.frames[frame_id % len(loop)][: loop.height], self._content_rows)

    async def stop(self) -> None:
        """DELETE the WHIP resource and close the connection. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        if self._location is not None:
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                async with self._http.delete(
                    self._location, headers=self.config.headers(), timeout=aiohttp.ClientTimeout(total=5)
                ):
                    pass
        if self._feedback is not None:
            self._feedback.cancel()
        if self._pc is not None:
            await self._pc.close()
        if self._viewer is not None:
            await self._viewer.close()
        if self._viewer_reader is not None:
            self._viewer_reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._viewer_reader
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
