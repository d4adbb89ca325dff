"""mesh_warp's swap and paste for a batch of frames on one torch device (the CUDA path of the swap stage).

Why: on a GPU the per-face image work (rasterisation, remap, masks, colour matching, paste) belongs beside
the models, and the frame should cross the bus twice per batch, not once per face and step. Each frame with
a face goes up once (uint8, `DeviceFrames`), every face of it is warped, matched, masked and pasted there
with `tensor_ops`, and the frame stays there for the enhancer; it comes back once per batch. The result
mirrors `MeshWarpSwapper.swap_one` + `paste_back` step by step (tests/unit/test_device_mesh_warp.py holds
the two to a PSNR bound on CPU torch). Poisson blending stays on the CPU path. Source images are uploaded
once per source and kept while it is in use.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from engines.factory import EngineConfig
from engines.processors import tensor_ops as T
from engines.processors.device_frames import DeviceFrames
from engines.processors.mesh_warp import BLUR_FRAC, ERODE_FRAC, MeshSource, face_window

SOURCES_KEPT = 16


def swap_device(swapper: str, poisson: bool, configured: str | None, engine: EngineConfig) -> str | None:
    """Where the swap stage's image work runs: the configured device, or the torch engine's CUDA device
    (mesh_warp without Poisson blending only: the device path has no seamlessClone)."""
    if swapper != "mesh_warp" or poisson:
        return None
    return configured if configured is not None else torch_cuda_device(engine)


def torch_cuda_device(engine: EngineConfig) -> str | None:
    """The torch engine's CUDA device, where the image work joins the models; None for any other engine."""
    if engine.backend == "torch" and engine.providers[:1] == ("cuda",):
        return f"cuda:{engine.device_id}"
    return None


class DeviceMeshWarp:
    name = "mesh_warp"

    def __init__(self, device: str) -> None:
        import torch

        self._torch = torch
        self.device = torch.device(device)
        self._sources: OrderedDict[int, tuple[MeshSource, Any]] = OrderedDict()

    def _source_image(self, source: MeshSource) -> Any:
        key = id(source)
        hit = self._sources.get(key)
        if hit is not None and hit[0] is source:
            self._sources.move_to_end(key)
            return hit[1]
        image = self._torch.from_numpy(np.ascontiguousarray(source.image)).to(self.device)
        # the source is held with its image: its id cannot be reused while the entry lives
        self._sources[key] = (source, image.permute(2, 0, 1).float())
        while len(self._sources) > SOURCES_KEPT:
            self._sources.popitem(last=False)
        return self._sources[key][1]

    def swap_and_paste(self, frames: DeviceFrames,
                       jobs: Sequence[tuple[int, np.ndarray, MeshSource, tuple[str, ...]]]
                       ) -> dict[int, list[tuple[int, int, int, int]]]:
        """For jobs (frame key, target landmarks (468, 2), source, regions kept): swap and paste each face
        into its frame on the device (`frames`, uploaded on first use, left there); the boxes pasted per
        frame."""
        touched: dict[int, list[tuple[int, int, int, int]]] = {}
        with self._torch.inference_mode():
            for key, target, source, keep in jobs:
                box = self._swap_one(frames.get(key), target, source, keep)
                if box is not None:
                    touched.setdefault(key, []).append(box)
        return touched

    def _swap_one(self, frame: Any, target: np.ndarray, source: MeshSource, keep: tuple[str, ...]
                  ) -> tuple[int, int, int, int] | None:
        torch = self._torch
        window = face_window(frame.shape[:2], target)
        if window is None:
            return None
        x0, y0, x1, y1 = window
        h, w = y1 - y0, x1 - x0
        local = target.astype(np.float64) - (x0, y0)
        maps = T.warp_maps(local, source, h, w, self.device)
        if maps is None:
            return None
        map_x, map_y, covered = maps
        warped = torch.floor(T.remap(self._source_image(source), map_x, map_y) + 0.5).clamp(0, 255)
        warped = warped.permute(1, 2, 0)
        size = float(max(h, w))
        hull = cv2.convexHull(local[source.mask_points].astype(np.float32)).reshape(-1, 2)
        erode, blur = max(1, int(size * ERODE_FRAC)), max(0.5, size * BLUR_FRAC)
        mask = T.feathered_polygon_mask(h, w, hull, erode, blur, self.device)
        mask = mask * T.feather(covered, erode, blur) * covered
        roi = frame[y0:y1, x0:x1]
        skin = (mask > 0.5) & T.skin_mask(h, w, local, size, self.device)
        image = T.match_colour(warped, roi, skin)
        if keep:
            mask = mask * (1.0 - T.region_mask(h, w, local, keep, size, self.device))
        T.blend(roi, image, mask)
        return x0, y0, x1, y1
