"""Pictures to publish: noisy panning frames that keep an encoder busy, frames of the provisioned talking-head
clip, and the flash track whose white frames mark the seconds for audio/video sync checks."""

from __future__ import annotations

from pathlib import Path

import av
import cv2
import numpy as np

from loadgen.avsync import MediaClock
from loadgen.track import StampedVideoTrack

FLASH_FPS = 15.0


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


def carphone_frames(
    path: Path, n: int = 6, step: int = 10, size: tuple[int, int] = (320, 240)
) -> list[np.ndarray]:
    """Every `step`-th frame of the clip, `n` of them, as RGB at `size` (width, height)."""
    frames: list[np.ndarray] = []
    with av.open(str(path)) as container:
        for i, frame in enumerate(container.decode(video=0)):
            if i % step == 0:
                frames.append(cv2.resize(frame.to_ndarray(format="rgb24"), size))
            if len(frames) >= n:
                break
    return frames


def flash_track(image: np.ndarray, clock: MediaClock) -> StampedVideoTrack:
    """Stamped frames on the shared clock; frame k is white when k/FLASH_FPS is a whole second (the click)."""
    return StampedVideoTrack.from_rgb(
        [np.full_like(image, 255)] + [image] * (int(FLASH_FPS) - 1), FLASH_FPS, clock=clock
    )


def read_rgb(path: Path) -> np.ndarray:
    """A provisioned still (PNG/JPEG) as RGB, as the gateway holds pictures."""
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert bgr is not None, path
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
