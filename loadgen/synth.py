"""Synthetic live video built from real faces, rendered ahead of time.

The load generator shares the machine with what it measures, so per-frame work is a copy of a precomputed
I420 frame plus the id stamp in its luma band. A loop of K frames moves the face(s) along a closed smooth
path, so looping shows no jump; every job of a run shares it (frames are copied before stamping).
Test cases: ``single_face`` (the astronaut portrait, or frames of ``source_video``, gliding and zooming over
a background) and ``multi_face`` (the six-person group photo panning and zooming gently).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import av
import cv2
import numpy as np

from loadgen.media import media_path
from loadgen.stamp import BLACK, BandGeometry, clear_band, write_stamp

TEST_CASES: tuple[str, ...] = ("single_face", "multi_face")


@dataclass(frozen=True)
class SynthConfig:
    width: int
    height: int
    fps: float
    test_case: str = "single_face"
    loop_frames: int = 0  # 0 = two seconds of video
    source_video: Path | None = None  # single_face: use this clip's frames instead of the still portrait

    def __post_init__(self) -> None:
        if self.test_case not in TEST_CASES:
            raise ValueError(f"unknown test case {self.test_case!r} (one of {', '.join(TEST_CASES)})")
        if self.width % 2 or self.height % 4:
            raise ValueError(
                f"resolution {self.width}x{self.height}: width must be even, height a multiple of 4"
            )
        if self.fps <= 0:
            raise ValueError("fps must be positive")

    @property
    def frames_in_loop(self) -> int:
        return self.loop_frames if self.loop_frames > 0 else max(2, int(round(self.fps * 2)))


def _read_rgb(path: Path) -> np.ndarray:
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError(f"cannot read image {path}")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def _read_video_rgb(path: Path, limit: int) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            out.append(frame.to_ndarray(format="rgb24"))
            if len(out) >= limit:
                break
    if not out:
        raise ValueError(f"no video frames in {path}")
    return out


def _background(width: int, height: int) -> np.ndarray:
    """A soft gradient with a few large shapes: cheap to encode, yet not a flat field."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    r = 60 + 50 * xx / width
    g = 70 + 40 * yy / height
    b = 110 + 40 * (1 - xx / width)
    bg = np.stack([r, g, b], axis=-1).astype(np.uint8)
    for i in range(4):
        cx, cy = int(width * (0.15 + 0.23 * i)), int(height * (0.25 + 0.15 * (i % 2)))
        cv2.circle(bg, (cx, cy), max(4, height // 10), (90 + 30 * i, 120, 80 + 20 * i), -1)
    return bg


def _paste(canvas: np.ndarray, img: np.ndarray, cx: float, cy: float, scale_h: float) -> None:
    """Paste `img` scaled to height `scale_h`, centred at (cx, cy), clipped to the canvas."""
    h = max(2, int(scale_h))
    w = max(2, int(img.shape[1] * h / img.shape[0]))
    resized = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA if h < img.shape[0] else cv2.INTER_LINEAR)
    x0, y0 = int(cx - w / 2), int(cy - h / 2)
    ch, cw = canvas.shape[:2]
    sx0, sy0 = max(0, -x0), max(0, -y0)
    dx0, dy0 = max(0, x0), max(0, y0)
    dx1, dy1 = min(cw, x0 + w), min(ch, y0 + h)
    if dx1 <= dx0 or dy1 <= dy0:
        return
    canvas[dy0:dy1, dx0:dx1] = resized[sy0 : sy0 + dy1 - dy0, sx0 : sx0 + dx1 - dx0]


class FrameLoop:
    """K precomputed I420 frames; `frame(i)` returns frame i of the endless loop with its ID stamped."""

    def __init__(self, frames: list[np.ndarray], width: int, height: int, fps: float) -> None:
        if not frames:
            raise ValueError("empty frame loop")
        self.frames = frames
        self.width = width
        self.height = height
        self.fps = fps

    @classmethod
    def from_rgb(cls, images: Sequence[np.ndarray], fps: float) -> FrameLoop:
        """RGB pictures of one size, converted as aiortc's encoder would convert them (swscale)."""
        if not images:
            raise ValueError("empty frame loop")
        frames = [
            av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
            .reformat(format="yuv420p")
            .to_ndarray()
            for image in images
        ]
        height, width = images[0].shape[:2]
        return cls(frames, width, height, fps)

    def __len__(self) -> int:
        return len(self.frames)

    def stamped_i420(self, frame_id: int) -> np.ndarray:
        buf = self.frames[frame_id % len(self.frames)].copy()
        write_stamp(buf[: self.height], frame_id)
        return buf

    def frame(self, frame_id: int) -> av.VideoFrame:
        return av.VideoFrame.from_ndarray(self.stamped_i420(frame_id), format="yuv420p")

    def plain(self, frame_id: int) -> av.VideoFrame:
        """Frame i of the loop without a stamp."""
        return av.VideoFrame.from_ndarray(self.frames[frame_id % len(self.frames)], format="yuv420p")

    def rgb(self, frame_id: int) -> np.ndarray:
        """The stamped frame as HxWx3 RGB (what the offline benchmark feeds the pipeline)."""
        return cv2.cvtColor(self.stamped_i420(frame_id), cv2.COLOR_YUV2RGB_I420)


def build_loop(config: SynthConfig, media_root: Path) -> FrameLoop:
    """Render the loop for one test case at one resolution (the only expensive step, done once per run)."""
    w, h, k = config.width, config.height, config.frames_in_loop
    geo = BandGeometry.for_size(w, h)
    content_h = geo.top
    bg = _background(w, content_h)
    clips: list[np.ndarray]
    if config.test_case == "single_face":
        if config.source_video is not None:
            clips = _read_video_rgb(config.source_video, k)
        else:
            clips = [_read_rgb(media_path(media_root, "astronaut.png"))]
    else:
        clips = [_read_rgb(media_path(media_root, "t1.jpg"))]
    frames: list[np.ndarray] = []
    for i in range(k):
        phase = 2 * math.pi * i / k
        canvas = bg.copy()
        src = clips[i % len(clips)]
        if config.test_case == "single_face":
            scale = content_h * (0.72 + 0.08 * math.sin(phase))
            cx = w / 2 + (w - scale) / 2 * 0.6 * math.sin(phase)
            cy = content_h / 2 + content_h * 0.04 * math.sin(2 * phase)
        else:
            aspect = src.shape[1] / src.shape[0]
            fit = min(content_h, w / aspect)
            scale = fit * (0.95 + 0.05 * math.sin(phase))
            cx = w / 2 + w * 0.02 * math.sin(phase)
            cy = content_h / 2 + content_h * 0.02 * math.cos(phase)
        _paste(canvas, src, cx, cy, scale)
        full = np.empty((h, w, 3), np.uint8)
        full[:content_h] = canvas
        full[content_h:] = 0
        i420 = cv2.cvtColor(full, cv2.COLOR_RGB2YUV_I420)
        clear_band(i420, w, h)
        i420[content_h:h] = BLACK
        frames.append(np.ascontiguousarray(i420))
    return FrameLoop(frames, w, h, config.fps)
