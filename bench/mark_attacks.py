"""What a marked stream goes through between the gateway and a platform's upload scanner, as functions
of I420 frames: the gateway's own encoders (VP8 and H.264 through the same FanoutEncoder the sessions use),
then a platform's transcode to H.264 (x264, as FFmpeg runs it), a downscale, a crop.

Every function decodes what it encoded: the result is the luma a detector would read from the file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import av
import cv2
import numpy as np

from gateway.media.fanout import FanoutEncoder
from gateway.webrtc.codecs import libvpx, libx264
from gateway.webrtc.congestion.bitrate import BitrateConfig

FPS = 15


@dataclass(frozen=True)
class Attack:
    """One path a platform takes: the gateway's codec and rate, then optionally a transcode at
    `transcode_bps`, a scale, and a crop of `crop` of the picture on each side."""

    name: str
    codec: str  # the gateway's: VP8 or H264
    gateway_bps: int
    transcode_bps: int | None = None
    scale: float = 1.0
    crop: float = 0.0


def attacks(gateway_bps: int = 300_000) -> tuple[Attack, ...]:
    half = gateway_bps // 2
    out: list[Attack] = []
    for codec in ("VP8", "H264"):
        tag = codec.lower()
        out += [
            Attack(f"{tag} {gateway_bps // 1000}k", codec, gateway_bps),
            Attack(f"{tag} -> h264 {half // 1000}k", codec, gateway_bps, transcode_bps=half),
            Attack(f"{tag} -> 0.5x", codec, gateway_bps, scale=0.5),
            Attack(f"{tag} -> 0.5x h264 {half // 1000}k", codec, gateway_bps, transcode_bps=half, scale=0.5),
            Attack(f"{tag} -> crop 10%", codec, gateway_bps, crop=0.10),
        ]
    return tuple(out)


def _frame(i420: np.ndarray, pts: int) -> av.VideoFrame:
    frame = av.VideoFrame.from_ndarray(i420, format="yuv420p")
    frame.pts = pts
    return frame


def gateway_encode(frames: Sequence[np.ndarray], codec: str, bps: int) -> list[np.ndarray]:
    """Through the gateway's own encoder at a fixed rate, decoded again: I420 frames out."""
    encoder = FanoutEncoder(
        bitrate=bps,
        codec=codec,
        bitrate_config=BitrateConfig(max_bps=bps, min_bps=bps, start_fraction=1.0, start_cap_bps=bps),
        libvpx=libvpx.load() if codec == "VP8" else None,
        libx264=libx264.load() if codec == "H264" else None,
    )
    decoder = av.CodecContext.create("vp8" if codec == "VP8" else "h264", "r")
    out: list[np.ndarray] = []
    h = frames[0].shape[0] * 2 // 3
    w = frames[0].shape[1]
    dummy = np.zeros((h, w, 3), np.uint8)
    for k, i420 in enumerate(frames):
        for packet in encoder.encode(dummy, k * 90_000 // FPS, _frame(i420, 0)):
            for decoded in decoder.decode(av.Packet(bytes(packet))):
                out.append(decoded.reformat(format="yuv420p").to_ndarray())
    return out


def transcode(frames: Sequence[np.ndarray], bps: int) -> list[np.ndarray]:
    """A platform's H.264 transcode: x264 `medium`, one-pass ABR at `bps`, B-frames, a 2 s GOP."""
    h = frames[0].shape[0] * 2 // 3
    w = frames[0].shape[1]
    encoder = av.CodecContext.create("libx264", "w")
    encoder.width, encoder.height, encoder.pix_fmt = w, h, "yuv420p"  # type: ignore[attr-defined]
    encoder.bit_rate = bps
    encoder.time_base = Fraction(1, FPS)
    encoder.framerate = Fraction(FPS, 1)  # type: ignore[attr-defined]
    encoder.gop_size = 2 * FPS  # type: ignore[attr-defined]
    encoder.options = {"preset": "medium"}
    decoder = av.CodecContext.create("h264", "r")
    out: list[np.ndarray] = []

    def drain(packets: list[av.Packet]) -> None:
        for packet in packets:
            for decoded in decoder.decode(packet):
                out.append(decoded.reformat(format="yuv420p").to_ndarray())

    for k, i420 in enumerate(frames):
        drain(list(encoder.encode(_frame(i420, k))))
    drain(list(encoder.encode(None)))
    for decoded in decoder.decode(None):
        out.append(decoded.reformat(format="yuv420p").to_ndarray())
    return out


def resized(i420: np.ndarray, scale: float) -> np.ndarray:
    """A rescale as FFmpeg's default (bicubic) would do it, to even dimensions."""
    h, w = i420.shape[0] * 2 // 3, i420.shape[1]
    size = (round(w * scale / 2) * 2, round(h * scale / 2) * 2)
    bgr = cv2.cvtColor(i420, cv2.COLOR_YUV2BGR_I420)
    return cv2.cvtColor(cv2.resize(bgr, size, interpolation=cv2.INTER_CUBIC), cv2.COLOR_BGR2YUV_I420)


def cropped(i420: np.ndarray, fraction: float) -> np.ndarray:
    """`fraction` of the picture cut from each side (kept at the size left, even)."""
    h, w = i420.shape[0] * 2 // 3, i420.shape[1]
    dy, dx = round(h * fraction / 2) * 2, round(w * fraction / 2) * 2
    bgr = cv2.cvtColor(i420, cv2.COLOR_YUV2BGR_I420)[dy : h - dy, dx : w - dx]
    return cv2.cvtColor(np.ascontiguousarray(bgr), cv2.COLOR_BGR2YUV_I420)


def apply(attack: Attack, frames: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The frames as a platform would hold them after `attack` (I420)."""
    out = gateway_encode(frames, attack.codec, attack.gateway_bps)
    if attack.crop:
        out = [cropped(f, attack.crop) for f in out]
    if attack.scale != 1.0:
        out = [resized(f, attack.scale) for f in out]
    if attack.transcode_bps is not None or attack.crop or attack.scale != 1.0:
        out = transcode(out, attack.transcode_bps or attack.gateway_bps)
    return out


def luma(i420: np.ndarray) -> np.ndarray:
    return i420[: i420.shape[0] * 2 // 3]
