"""The mark on the device: the same mark as `embed.Embedder`, with the full-resolution work (the area
sampling, the spread of the chips to pixels, the saturated add) as torch ops on the luma tensor where it
lives, and the chip-level work (a few thousand values: the picture's projection on the layers, the gains)
shared with the CPU path, one small download and upload per refresh (the change is held between, as on the
CPU). tests/unit/engines/marking/test_device_embed.py holds it to the numpy path on CPU torch."""

from __future__ import annotations

from typing import Any

import numpy as np

from engines.marking.embed import Embedder, Schedule, grid_shape
from engines.marking.pattern import chip_size
from engines.marking.samples import SAMPLES


def _torch() -> Any:
    import torch

    return torch


def sampled(luma: Any, chip_px: float) -> Any:
    """`samples.sampled` on a (H, W) tensor: an average pool by the whole factor, then bilinear (float32)."""
    import torch.nn.functional as F

    h, w = luma.shape
    size = (max(1, round(h * SAMPLES / chip_px)), max(1, round(w * SAMPLES / chip_px)))
    x = luma.float()[None, None]
    k = int(chip_px / SAMPLES)
    if k >= 2:
        x = F.adaptive_avg_pool2d(x, (max(size[0], h // k), max(size[1], w // k)))
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False)[0, 0]


def spread(chips: Any, height: int, width: int) -> Any:
    """`embed.spread` on the device: chip values bilinear between chip centres, square chips."""
    import torch.nn.functional as F

    _, _, full = grid_shape(height, width)
    x = F.interpolate(chips[None, None], size=(height, full), mode="bilinear", align_corners=False)
    return x[0, 0, :, :width]


class DeviceEmbedder:
    """Marks (H, W) uint8 luma tensors in place (a view of a frame's Y plane on the device)."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._schedule = Schedule()  # as `Embedder.mark`: when the change is worked out, how strong
        self._held: Any = None

    def restart(self) -> None:
        """As `Embedder.restart`: a keyframe next, the stronger start again."""
        self._schedule.restart()

    def delta(self, luma: Any, boost: float = 1.0) -> Any:
        torch = _torch()
        height, width = luma.shape
        samples = sampled(luma, chip_size(height)).cpu().numpy()
        chips = self._embedder.chips(np.ascontiguousarray(samples, np.float32), height, width, boost)
        return spread(torch.from_numpy(chips).to(luma.device), height, width)

    def mark(self, luma: Any) -> None:
        boost = self._schedule.next(tuple(luma.shape))
        if boost is not None:
            self._held = self.delta(luma, boost)
        out = (luma.float() + self._held).round_().clamp_(0, 255)
        luma.copy_(out.to(luma.dtype))
