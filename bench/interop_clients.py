"""The third-party WebRTC clients the interop matrix drives, each as its users run it.

- FFmpeg 8's WHIP muxer, the one inside PyAV's wheel (`av.open(url, "w", format="whip")`): H.264 baseline
  from libx264, optionally Opus from libopus, in a child process (`python -m bench.interop_clients
  ffmpeg ...`) so that FFmpeg's blocking network code never shares the event loop it talks to.
- libdatachannel through node-datachannel (tests/interop/whip_client.cjs, installed by `npm ci` there):
  a WHIP publisher set up as OBS Studio's WHIP output, and a WHEP viewer.
- GStreamer's webrtcbin under Debian's system Python (tests/harness/gst_whip_publisher.py).
- aiortc (the WHEP viewer that checks Opus arrives, and a publisher for the libdatachannel viewer).
Every client reports a `ClientRun`; none of them prints.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fractions
import json
import os
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NODE_CLIENT = ROOT / "tests" / "interop" / "whip_client.cjs"
GST_PUBLISHER = ROOT / "tests" / "harness" / "gst_whip_publisher.py"
SYSTEM_PYTHON = "/usr/bin/python3"
FPS = 15


@dataclass
class ClientRun:
    """What one client run saw, from its own side."""

    connected: bool
    error: str = ""
    sent_video: int = 0
    sent_audio: int = 0
    received_video_frames: int = 0
    received_audio: int = 0
    location: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def face_frames(image_path: Path, width: int, height: int, count: int) -> list[np.ndarray]:
    """`count` RGB frames of the image, panned slowly (a face that moves a little, as on a webcam)."""
    import cv2

    bgr = cv2.imread(str(image_path))
    if bgr is None:
        raise FileNotFoundError(f"cannot read {image_path}")
    rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    big = cv2.resize(rgb, (int(width * 1.2), int(height * 1.2)))
    frames = []
    for i in range(count):
        dx = int((big.shape[1] - width) * (0.5 + 0.5 * np.sin(i / 9.0)))
        frames.append(np.ascontiguousarray(big[:height, dx : dx + width]))
    return frames


def write_clip(path: Path, frames: list[np.ndarray], audio: bool) -> Path:
    """The clip the libdatachannel publisher sends: H.264 baseline access units (Annex B, a keyframe each
    second) and 20 ms Opus packets of a tone, as records of kind, RTP timestamp, length, payload."""
    import av

    height, width = frames[0].shape[:2]
    video = av.CodecContext.create("libx264", "w")
    video.width, video.height, video.pix_fmt = width, height, "yuv420p"
    video.time_base = fractions.Fraction(1, 90000)
    video.framerate = fractions.Fraction(FPS, 1)
    video.options = {
        "profile": "baseline",
        "preset": "ultrafast",
        "tune": "zerolatency",
        "bf": "0",
        "g": str(FPS),
        "x264-params": "repeat-headers=1",
    }
    records: list[tuple[bytes, int, bytes]] = []
    for i, rgb in enumerate(frames):
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
        frame.pts = i * 90000 // FPS
        frame.time_base = video.time_base
        for packet in video.encode(frame):
            records.append((b"V", sum(r[0] == b"V" for r in records) * 90000 // FPS, bytes(packet)))
    for packet in video.encode(None):
        records.append((b"V", sum(r[0] == b"V" for r in records) * 90000 // FPS, bytes(packet)))
    if audio:
        opus = av.CodecContext.create("libopus", "w")
        opus.sample_rate, opus.layout, opus.format = 48000, "stereo", "s16"
        samples = len(frames) * 48000 // FPS
        t = np.arange(samples) / 48000.0
        tone = (np.sin(2 * np.pi * 440.0 * t) * 6000).astype(np.int16)
        for start in range(0, samples - 960 + 1, 960):
            chunk = np.repeat(tone[start : start + 960][None, :], 2, axis=0).T.reshape(1, -1)
            tone_frame = av.AudioFrame.from_ndarray(chunk, format="s16", layout="stereo")
            tone_frame.sample_rate, tone_frame.pts = 48000, start
            for packet in opus.encode(tone_frame):  # one 20 ms packet per 960 samples in
                records.append((b"A", sum(r[0] == b"A" for r in records) * 960, bytes(packet)))
    with path.open("wb") as out:
        for kind, ts, payload in records:
            out.write(kind + struct.pack(">II", ts & 0xFFFFFFFF, len(payload)) + payload)
    return path


# -- FFmpeg's WHIP muxer ------------------------------------------------------------------------------


def publish_ffmpeg(url: str, token: str, image: Path, seconds: float, audio: bool) -> ClientRun:
    """Publish through FFmpeg's WHIP muxer in this process (blocking): libx264 baseline, no B-frames."""
    import av

    frames = face_frames(image, 320, 240, FPS * 2)
    opened = time.monotonic()
    timeline: dict[str, float] = {}
    try:
        out = av.open(url, "w", format="whip", options={"authorization": token})
    except (av.FFmpegError, OSError) as exc:
        return ClientRun(False, error=f"open: {exc}")
    sent_video = sent_audio = 0
    try:
        video = out.add_stream("libx264", rate=FPS)
        video.width, video.height, video.pix_fmt = 320, 240, "yuv420p"
        video.options = {
            "profile": "baseline",
            "bf": "0",
            "g": str(FPS),
            "preset": "ultrafast",
            "tune": "zerolatency",
        }
        sound = out.add_stream("libopus", rate=48000) if audio else None
        if sound is not None:
            sound.layout = "stereo"
        start = time.monotonic()
        for i in range(int(seconds * FPS)):
            frame = av.VideoFrame.from_ndarray(frames[i % len(frames)], format="rgb24")
            frame.pts, frame.time_base = i, fractions.Fraction(1, FPS)
            for packet in video.encode(frame):
                out.mux(packet)  # the first mux connects: WHIP POST, ICE, DTLS
                timeline.setdefault("connected", round((time.monotonic() - opened) * 1000.0, 1))
            sent_video += 1
            if sound is not None:
                for _ in range(3 + (1 if i % 3 == 2 else 0)):  # 10 x 20 ms per 3 frames at 15 fps
                    chunk = np.zeros((1, 960 * 2), np.int16)
                    af = av.AudioFrame.from_ndarray(chunk, format="s16", layout="stereo")
                    af.sample_rate, af.time_base = 48000, fractions.Fraction(1, 48000)
                    af.pts = sent_audio * 960
                    for packet in sound.encode(af):
                        out.mux(packet)
                    sent_audio += 1
            time.sleep(max(0.0, start + (i + 1) / FPS - time.monotonic()))
        out.close()
    except (av.FFmpegError, OSError) as exc:
        return ClientRun(sent_video > 0, error=str(exc), sent_video=sent_video, sent_audio=sent_audio)
    return ClientRun(True, sent_video=sent_video, sent_audio=sent_audio, details={"timeline_ms": timeline})


async def run_ffmpeg(url: str, token: str, image: Path, seconds: float, audio: bool) -> ClientRun:
    """`publish_ffmpeg` in a child process; its JSON line back as a ClientRun."""
    args = ["ffmpeg", url, "--token", token, "--image", str(image), "--seconds", str(seconds)]
    found = await _child(
        [sys.executable, "-m", "bench.interop_clients", *args, *(["--audio"] if audio else [])],
        timeout_s=seconds + 30,
    )
    if found is None:
        return ClientRun(False, error="FFmpeg's publisher printed no result")
    return ClientRun(**found)


# -- libdatachannel ----------------------------------------------------------------------------------


def node_client_missing() -> str | None:
    """Why the libdatachannel client cannot run here, or None."""
    if not (NODE_CLIENT.parent / "node_modules" / "node-datachannel").is_dir():
        return f"node-datachannel is not installed (npm ci --prefix {NODE_CLIENT.parent})"
    return None


async def run_datachannel(spec: dict[str, Any], timeout_s: float) -> ClientRun:
    """The node client with `spec` (its JSON argument); its result line as a ClientRun."""
    found = await _child(
        ["node", str(NODE_CLIENT), json.dumps({**spec, "timeout": timeout_s})], timeout_s=timeout_s + 10
    )
    if found is None:
        return ClientRun(False, error="the libdatachannel client printed no result")
    errors = found.get("errors") or []
    return ClientRun(
        connected=bool(found.get("connected")),
        error="; ".join(errors)[:500],
        sent_video=found.get("sent", {}).get("video", 0),
        sent_audio=found.get("sent", {}).get("audio", 0),
        received_video_frames=found.get("received", {}).get("video_frames", 0),
        received_audio=found.get("received", {}).get("audio", 0),
        location=found.get("location"),
        details={
            "library": found.get("library"),
            "states": found.get("states"),
            "log_tail": found.get("log_tail", []),
            "timeline_ms": found.get("timeline_ms") or {},
            "frame_ms": found.get("frame_ms") or [],
        },
    )


def decode_viewer_video(path: Path) -> int:
    """How many frames the RTP the libdatachannel viewer wrote (VP8 or H.264, by payload type) decode to."""
    return decode_viewer_frames(path)[0]


def decode_viewer_frames(path: Path) -> tuple[int, int | None]:
    """(frames decoded, the index among the received frames of the first one that decoded to a picture)
    from the RTP the libdatachannel viewer wrote (VP8 or H.264, by payload type)."""
    import av
    from aiortc.codecs import depayload
    from aiortc.rtcrtpparameters import RTCRtpCodecParameters

    data = path.read_bytes()
    codecs = {96: ("video/VP8", "vp8"), 102: ("video/H264", "h264")}
    decoders: dict[int, Any] = {}
    pending: dict[int, list[tuple[int, bytes]]] = {}
    decoded = 0
    first: int | None = None
    completed = 0  # frames completed (marker packets) so far
    at = 0
    while at + 5 <= len(data):
        kind, length = data[at : at + 1], struct.unpack(">I", data[at + 1 : at + 5])[0]
        packet = data[at + 5 : at + 5 + length]
        at += 5 + length
        if kind != b"V" or len(packet) < 12:
            continue
        pt, marker = packet[1] & 0x7F, bool(packet[1] & 0x80)
        if pt not in codecs:
            continue
        header = 12 + 4 * (packet[0] & 0x0F)
        if packet[0] & 0x10:  # header extension
            ext_words = struct.unpack(">H", packet[header + 2 : header + 4])[0]
            header += 4 + 4 * ext_words
        mime, name = codecs[pt]
        codec = RTCRtpCodecParameters(mimeType=mime, clockRate=90000, payloadType=pt)
        pending.setdefault(pt, []).append(
            (struct.unpack(">H", packet[2:4])[0], depayload(codec, packet[header:]))
        )
        if marker:
            completed += 1
            parts = [p for _, p in sorted(pending.pop(pt))]
            decoder = decoders.setdefault(pt, av.CodecContext.create(name, "r"))
            try:
                pictures = len(decoder.decode(av.Packet(b"".join(parts))))
            except av.FFmpegError:
                continue
            if pictures and first is None:
                first = completed - 1
            decoded += pictures
    return decoded, first


# -- GStreamer webrtcbin -----------------------------------------------------------------------------

GST_PACKAGES = (
    "python3-gi gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0 gir1.2-gst-plugins-bad-1.0 gir1.2-nice-0.1 "
    "gstreamer1.0-nice gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad"
)
GST_PROBE = """
import gi
for name, version in (("Gst", "1.0"), ("GstWebRTC", "1.0"), ("GstSdp", "1.0"), ("Nice", "0.1")):
    gi.require_version(name, version)
from gi.repository import Gst
Gst.init(None)
missing = [e for e in ("webrtcbin", "nicesrc", "dtlssrtpenc", "vp8enc", "vp8dec", "rtpvp8pay", "videotestsrc")
           if Gst.ElementFactory.find(e) is None]
print(",".join(missing))
"""


def gstreamer_missing() -> str | None:
    """Why GStreamer's webrtcbin cannot run here (Debian's system Python with its bindings), or None."""
    if not os.path.exists(SYSTEM_PYTHON):
        return f"{SYSTEM_PYTHON} not found"
    try:
        done = subprocess.run([SYSTEM_PYTHON, "-c", GST_PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"probing GStreamer failed: {exc}"
    if done.returncode != 0:
        return f"GStreamer bindings missing ({done.stderr.strip().splitlines()[-1:]})"
    if done.stdout.strip():
        return f"GStreamer elements missing: {done.stdout.strip()}"
    return None


async def run_gstreamer(url: str, token: str, address: str, seconds: float) -> ClientRun:
    """The GStreamer publisher's run (the matrix asks `gstreamer_missing` first)."""
    found = await _child(
        [
            SYSTEM_PYTHON,
            str(GST_PUBLISHER),
            url,
            "--seconds",
            str(seconds),
            "--token",
            token,
            "--address",
            address,
        ],
        timeout_s=seconds + 40,
    )
    if found is None:
        return ClientRun(False, error="the GStreamer publisher printed no result")
    return ClientRun(
        connected=found.get("connection_state") == "connected",
        error="; ".join(found.get("errors") or [])[:500],
        sent_video=int(found.get("frames_sent") or 0),
        received_video_frames=int(found.get("frames_received") or 0),
        details={"answer_setup": found.get("answer_setup"), "timeline_ms": found.get("timeline_ms") or {}},
    )


# -- aiortc peers ------------------------------------------------------------------------------------
# aiohttp and aiortc are imported inside: the FFmpeg child process imports this module and needs neither.


@dataclass
class ViewerRun:
    """What an aiortc WHEP viewer received, and when its first video frame decoded (ms after its POST)."""

    video: int = 0
    audio: int = 0
    first_video_ms: float | None = None


async def aiortc_viewer(url: str, token: str, session_id: str, seconds: float) -> ViewerRun:
    """An aiortc WHEP viewer for `seconds`: video and Opus frames received, the first video frame's time."""
    import aiohttp
    from aiortc import RTCSessionDescription

    from gateway.webrtc.install import create_peer_connection
    from gateway.webrtc.interop.ice import IceConfig

    pc = create_peer_connection(IceConfig())
    pc.addTransceiver("video", direction="recvonly")
    pc.addTransceiver("audio", direction="recvonly")
    run = ViewerRun()
    tasks: list[asyncio.Task[None]] = []
    posted = time.monotonic()

    async def consume(track: Any) -> None:
        with contextlib.suppress(Exception):
            while True:
                await track.recv()
                if track.kind == "video":
                    if run.first_video_ms is None:
                        run.first_video_ms = round((time.monotonic() - posted) * 1000.0, 1)
                    run.video += 1
                else:
                    run.audio += 1

    pc.on("track", lambda track: tasks.append(asyncio.ensure_future(consume(track))))
    try:
        await pc.setLocalDescription(await pc.createOffer())
        posted = time.monotonic()
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{url}/whep/{session_id}",
                data=pc.localDescription.sdp,
                headers={"Content-Type": "application/sdp", "Authorization": f"Bearer {token}"},
            ) as resp,
        ):
            if resp.status != 201:
                return run
            answer = await resp.text()
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
        await asyncio.sleep(seconds)
        return run
    finally:
        for task in tasks:
            task.cancel()
        await pc.close()


async def aiortc_publisher(url: str, token: str, image: Path, seconds: float, audio: bool) -> ClientRun:
    import aiohttp
    from aiortc import RTCSessionDescription
    from aiortc.mediastreams import AudioStreamTrack

    from gateway.webrtc.install import create_peer_connection
    from gateway.webrtc.interop.ice import IceConfig
    from loadgen.track import StampedVideoTrack

    pc = create_peer_connection(IceConfig())
    track = StampedVideoTrack.from_rgb(face_frames(image, 320, 240, 30), 15.0)
    pc.addTransceiver(track, direction="sendrecv")
    if audio:
        pc.addTransceiver(AudioStreamTrack(), direction="sendonly")
    connected = asyncio.Event()
    timeline: dict[str, float] = {}
    posted = time.monotonic()
    tasks: list[asyncio.Task[None]] = []

    def mark(name: str) -> None:
        timeline.setdefault(name, round((time.monotonic() - posted) * 1000.0, 1))

    def on_state() -> None:
        if pc.connectionState == "connected":
            mark("connected")
            connected.set()

    async def consume(returned: Any) -> None:  # the processed video coming back, decoded
        with contextlib.suppress(Exception):
            await returned.recv()
            mark("first_decoded")
            while True:
                await returned.recv()

    pc.on("connectionstatechange", on_state)
    pc.on("track", lambda t: tasks.append(asyncio.ensure_future(consume(t))) if t.kind == "video" else None)
    try:
        await pc.setLocalDescription(await pc.createOffer())
        posted = time.monotonic()
        async with aiohttp.ClientSession() as http:
            async with http.post(
                url + "/whip",
                data=pc.localDescription.sdp,
                headers={"Content-Type": "application/sdp", "Authorization": f"Bearer {token}"},
            ) as resp:
                if resp.status != 201:
                    return ClientRun(False, error=f"POST answered {resp.status}")
                answer, location = await resp.text(), resp.headers.get("Location")
            mark("answer")
            await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(connected.wait(), 15)
            await asyncio.sleep(seconds)
            if location:
                with contextlib.suppress(aiohttp.ClientError):
                    await http.delete(location, headers={"Authorization": f"Bearer {token}"})
        return ClientRun(connected.is_set(), location=location, details={"timeline_ms": timeline})
    finally:
        for task in tasks:
            task.cancel()
        track.stop()
        await pc.close()


# -- child processes ---------------------------------------------------------------------------------


async def _child(argv: list[str], timeout_s: float) -> dict[str, Any] | None:
    """Run `argv`; its last JSON line, or None (killed after `timeout_s`)."""
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, _err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        out, _err = await proc.communicate()
    lines = [line for line in out.decode(errors="replace").splitlines() if line.startswith("{")]
    if not lines:
        return None
    try:
        parsed: dict[str, Any] = json.loads(lines[-1])
    except ValueError:
        return None
    return parsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.interop_clients")
    sub = parser.add_subparsers(dest="client", required=True)
    ff = sub.add_parser("ffmpeg", help="publish through FFmpeg's WHIP muxer; print one JSON line")
    ff.add_argument("url")
    ff.add_argument("--token", default="")
    ff.add_argument("--image", type=Path, required=True)
    ff.add_argument("--seconds", type=float, default=3.0)
    ff.add_argument("--audio", action="store_true")
    args = parser.parse_args(argv)
    run = publish_ffmpeg(args.url, args.token, args.image, args.seconds, args.audio)
    print(json.dumps({k: v for k, v in run.__dict__.items()}), flush=True)
    return 0 if run.connected else 1


if __name__ == "__main__":
    sys.exit(main())
