"""One batch's frames on a torch device: each uploaded once, written in place by every device stage (the swap,
the enhancer), and downloaded once for the whole batch, with the I420 planes of their changed boxes.

Why: the frame should cross the bus twice per batch, not once per stage. The download packs every touched
frame and the I420 planes of its changed boxes (`tensor_ops.rgb_to_i420` over `even_box`, what
`gateway.media.planes.patched_frame` would convert on the host) into one tensor: one transfer, and the
encoder gets planes the CPU did not have to convert. The RGB still comes back: it is the pipeline's output
(late policies, odd sizes and the host-side consumers read it), and the pixels outside the boxes keep the
decoded planes bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engines.frames import Box, even_box
from engines.processors import tensor_ops as T


@dataclass(frozen=True)
class Downloaded:
    """A touched frame back on the host: its RGB and, per changed box, that box's I420 planes (None for an
    empty box); `regions` is None for odd-sized frames (no 4:2:0 there: the host converts from RGB)."""

    image: np.ndarray
    regions: tuple[np.ndarray | None, ...] | None


class DeviceFrames:
    def __init__(self, device: Any, host: Callable[[int], np.ndarray]) -> None:
        import torch

        self._torch = torch
        self.device = torch.device(device) if isinstance(device, str) else device
        self._host = host
        self._frames: dict[int, Any] = {}

    def get(self, key: int) -> Any:
        """Frame `key` as an (H, W, 3) uint8 tensor on the device, uploaded on first use. A copy even on the
        CPU: the host frame is never written (the numpy path copies too)."""
        frame = self._frames.get(key)
        if frame is None:
            frame = self._frames[key] = self._torch.from_numpy(np.ascontiguousarray(self._host(key))).to(
                self.device, copy=True
            )
        return frame

    def __contains__(self, key: int) -> bool:
        return key in self._frames

    def download(self, touched: Mapping[int, Sequence[Box]], i420: bool = True) -> dict[int, Downloaded]:
        """The frames of `touched` that are on the device, each with its boxes' I420 planes (`i420`), in one
        device -> host transfer."""
        torch = self._torch
        keys = [k for k in touched if k in self._frames]
        if not keys:
            return {}
        parts: list[Any] = []
        layout: list[tuple[int, tuple[int, ...], list[tuple[int, int] | None] | None]] = []
        with torch.inference_mode():
            for k in keys:
                frame = self._frames[k]
                parts.append(frame.reshape(-1))
                h, w = frame.shape[:2]
                shapes: list[tuple[int, int] | None] | None = None
                if i420 and h % 2 == 0 and w % 2 == 0:
                    shapes = []
                    for box in touched[k]:
                        even = even_box(box, w, h)
                        if even is None:
                            shapes.append(None)
                            continue
                        x0, y0, x1, y1 = even
                        parts.append(T.rgb_to_i420(frame[y0:y1, x0:x1]).reshape(-1))
                        shapes.append(((y1 - y0) * 3 // 2, x1 - x0))
                layout.append((k, tuple(frame.shape), shapes))
            flat = torch.cat(parts).cpu().numpy()
        out: dict[int, Downloaded] = {}
        at = 0
        for k, shape, shapes in layout:
            n = int(np.prod(shape))
            image = flat[at : at + n].reshape(shape)
            at += n
            regions: tuple[np.ndarray | None, ...] | None = None
            if shapes is not None:
                cut: list[np.ndarray | None] = []
                for s in shapes:
                    if s is None:
                        cut.append(None)
                        continue
                    cut.append(flat[at : at + s[0] * s[1]].reshape(s))
                    at += s[0] * s[1]
                regions = tuple(cut)
            out[k] = Downloaded(image, regions)
        return out
