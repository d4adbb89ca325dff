"""The detector's view of a luma plane, shared with the embedder (which reads the picture as the detector
will, to cancel what the picture itself says along the mark's patterns).

Two samples per chip each way (one area resize), whitened: each sample less its neighbourhood's mean (the
picture's own content is mostly slower than a chip), divided by the neighbourhood's spread plus `FLOOR` (an
edge must not outvote the grain, and flat areas, where the grain is clearest, count fully), clipped; then
folded modulo the tile (every repeat of the tile adds up)."""

from __future__ import annotations

import cv2
import numpy as np

from engines.marking.pattern import TILE

SAMPLES = 2  # per chip, each way (a crop's half-chip offset still correlates)
FLOOR = 0.5  # grey levels: below this a neighbourhood's spread is noise, not content
CLIP = 0.35  # in units of the grain: a sample counts for the sign of its deviation, not its size


def sampled(luma: np.ndarray, chip_px: float) -> np.ndarray:
    """The luma averaged down to SAMPLES per chip each way (float32): an area resize by the whole factor
    (OpenCV's fast path), then a bilinear one for the rest (an area resize by a fractional factor costs
    several times more)."""
    h, w = luma.shape
    size = (max(1, round(w * SAMPLES / chip_px)), max(1, round(h * SAMPLES / chip_px)))
    k = int(chip_px / SAMPLES)
    if luma.dtype == np.uint8 and k in (2, 4, 8, 16) and h % k == 0 and w % k == 0:
        # halvings (OpenCV's area resize by exactly 2 is several times faster than by 4) on the luma
        # times k * k in 16 bits: every halving is exact, and the mean keeps its fraction
        x = np.multiply(luma, np.uint16(k * k), dtype=np.uint16)
        for _ in range(k.bit_length() - 1):
            x = cv2.resize(x, (x.shape[1] // 2, x.shape[0] // 2), interpolation=cv2.INTER_AREA)
        luma = x.astype(np.float32) * np.float32(1.0 / (k * k))
    elif k >= 2:
        luma = cv2.resize(luma, (max(size[0], w // k), max(size[1], h // k)), interpolation=cv2.INTER_AREA)
    if luma.shape[::-1] != size:
        luma = cv2.resize(luma, size, interpolation=cv2.INTER_LINEAR)
    return luma.astype(np.float32, copy=False)


def whitened(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The whitened samples and each one's weight (1 / (spread + FLOOR)): the detector's statistic is
    linear in a small change of the picture, with that weight."""
    local = cv2.blur(samples, (2 * SAMPLES + 1, 2 * SAMPLES + 1), borderType=cv2.BORDER_REFLECT)
    w = samples - local
    spread = cv2.blur(np.abs(w), (4 * SAMPLES + 1, 4 * SAMPLES + 1), borderType=cv2.BORDER_REFLECT)
    weight = 1.0 / (spread + FLOOR)
    return np.clip(w * weight, -CLIP, CLIP), weight


def folded(samples: np.ndarray) -> np.ndarray:
    """Summed modulo the tile's period (SAMPLES * TILE each way)."""
    period = SAMPLES * TILE
    h, w = samples.shape
    padded = np.zeros((-(-h // period) * period, -(-w // period) * period), np.float32)
    padded[:h, :w] = samples
    return padded.reshape(padded.shape[0] // period, period, padded.shape[1] // period, period).sum(
        axis=(0, 2)
    )


def upsampled(tile: np.ndarray) -> np.ndarray:
    """A chip tile at the samples' resolution."""
    return np.kron(tile, np.ones((SAMPLES, SAMPLES), np.float32)).astype(np.float32)


def response(tile: np.ndarray, chip_px: int = 8) -> np.ndarray:
    """What the detector's samples see of a chip tile once embedded (spread bilinearly between chip centres,
    averaged down to SAMPLES per chip, less the neighbourhood's mean): the matched filter for that tile,
    folded (SAMPLES * TILE each way). Computed on one period with wrap-around, so it is exact for the tile
    repeated."""
    n = tile.shape[0]
    padded = np.pad(tile.astype(np.float32), 1, mode="wrap")
    size = (n + 2) * chip_px
    plane = cv2.resize(padded, (size, size), interpolation=cv2.INTER_LINEAR)
    plane = plane[chip_px:-chip_px, chip_px:-chip_px]
    step = chip_px // SAMPLES
    s = plane.reshape(n * SAMPLES, step, n * SAMPLES, step).mean(axis=(1, 3))
    k = 2 * SAMPLES + 1
    local = cv2.blur(np.pad(s, k // 2, mode="wrap"), (k, k))[k // 2 : -(k // 2), k // 2 : -(k // 2)]
    return (s - local).astype(np.float32)
