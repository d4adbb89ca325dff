"""mesh_warp's swap and paste for a batch of frames on one torch device (the CUDA path of the swap stage).

Why: on a GPU the per-face image work (rasterisation, remap, masks, the target's light, paste) belongs beside
the models, and the frame should cross the bus twice per batch, not once per face and step. Each frame with
a face goes up once (uint8, `DeviceFrames`), every face of it is warped, matched, masked and pasted there
with `tensor_ops`, and it comes back once per batch. The result mirrors `MeshWarpSwapper.swap_one` +
`paste_back` step by step (tests/unit/engines/processors/test_device_mesh_warp.py holds the two to a PSNR
bound on CPU torch). Poisson blending stays on the CPU path. Each source's texture (the host's: L*a*b* over
the mesh's box, its validity as a fourth channel) goes up once per source. The shape transfer's plan
(`face_shape.plan_warp`) is made on the host; its coarse offset grid goes up and moves the target's pixels
with one `grid_sample`, held over the mouth by `mouth_hold`'s torch twin.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from engines.factory import EngineConfig
from engines.processors import tensor_ops as T
from engines.processors import tensor_shading as S
from engines.processors.device_frames import DeviceFrames
from engines.processors.face_shape import plan_warp, shape_offset
from engines.processors.mesh_warp import BLUR_FRAC, ERODE_FRAC, SHAPE, face_window
from engines.processors.mouth_hold import device_weight, hold_offsets, hold_shape
from engines.processors.paste import SEAM_DIFF, SEAM_STEP, SEAM_WIDEN
from engines.source.mesh import MeshSource

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
        image = self._torch.from_numpy(np.ascontiguousarray(source.lab)).to(self.device)  # L*a*b* + validity
        # the source is held with its image: its id cannot be reused while the entry lives
        self._sources[key] = (source, image.permute(2, 0, 1).float())
        while len(self._sources) > SOURCES_KEPT:
            self._sources.popitem(last=False)
        return self._sources[key][1]

    def swap_and_paste(
        self,
        frames: DeviceFrames,
        jobs: Sequence[tuple[int, np.ndarray, MeshSource, tuple[str, ...]]],
        shape: Sequence[float] | None = None,
        brows_rest: Sequence[np.ndarray | None] | None = None,
    ) -> dict[int, list[tuple[int, int, int, int]]]:
        """For jobs (frame key, target landmarks (468, 2), source, regions kept): swap and paste each face
        into its frame on the device (`frames`, uploaded on first use, left there); `shape[i]`: how much of
        the source's face shape job i takes (default SHAPE); `brows_rest[i]`: its target's brows at rest
        (the tracker's; None: a still picture). The boxes pasted per frame."""
        touched: dict[int, list[tuple[int, int, int, int]]] = {}
        with self._torch.inference_mode():
            for i, (key, target, source, keep) in enumerate(jobs):
                box = self._swap_one(
                    frames.get(key),
                    target,
                    source,
                    keep,
                    shape[i] if shape is not None else SHAPE,
                    brows_rest[i] if brows_rest is not None else None,
                )
                if box is not None:
                    touched.setdefault(key, []).append(box)
        return touched

    def _swap_one(
        self,
        frame: Any,
        target: np.ndarray,
        source: MeshSource,
        keep: tuple[str, ...],
        shape: float,
        brows_rest: np.ndarray | None = None,
    ) -> tuple[int, int, int, int] | None:
        """As MeshWarpSwapper.swap_one + paste_back: the target's pixels moved to the source's shape (when
        `shape` > 0), then the face pasted on the new mesh."""
        torch = self._torch
        plan = (
            plan_warp(frame.shape[:2], target, shape_offset(source.shape, target, brows_rest), shape)
            if shape > 0.0 and source.shape is not None
            else None
        )
        if plan is None:
            return self._face_into(frame, target, source, keep)
        x0, y0, x1, y1 = plan.window
        h, w = y1 - y0, x1 - x0
        fh, fw = frame.shape[:2]
        grid = torch.from_numpy(plan.grid).to(self.device).permute(2, 0, 1)[None]
        offsets = torch.nn.functional.interpolate(grid, size=(h, w), mode="bilinear", align_corners=True)[0]
        held = hold_shape(plan, target)  # the mouth's opening moved as one (mouth_hold)
        largest = float(np.abs(plan.grid).max())
        if held is not None:
            hold_offsets(offsets, held, device_weight(held, self.device))
            largest = max(largest, float(np.abs(held.shift).max()))
        # read only the window and a margin as wide as the largest offset (the map's reach), not the frame
        reach = int(np.ceil(largest)) + 2
        rx0, ry0 = max(x0 - reach, 0), max(y0 - reach, 0)
        rx1, ry1 = min(x1 + reach, fw), min(y1 + reach, fh)
        xs = torch.arange(x0 - rx0, x1 - rx0, device=self.device, dtype=torch.float32)
        ys = torch.arange(y0 - ry0, y1 - ry0, device=self.device, dtype=torch.float32)
        region = frame[ry0:ry1, rx0:rx1].permute(2, 0, 1).float()
        moved = T.remap(region, offsets[0] + xs[None, :], offsets[1] + ys[:, None])
        work = torch.floor(moved + 0.5).clamp(0, 255).to(torch.uint8).permute(1, 2, 0).contiguous()
        self._face_into(work, plan.landmarks - np.array((x0, y0), np.float32), source, keep)
        frame[y0:y1, x0:x1].copy_(work)  # the window's edge did not move: the whole window goes in as is
        return x0, y0, x1, y1

    def _face_into(
        self, frame: Any, target: np.ndarray, source: MeshSource, keep: tuple[str, ...]
    ) -> tuple[int, int, int, int] | None:
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
        texture = T.remap(self._source_image(source), map_x, map_y)
        warped = texture[:3].permute(1, 2, 0)  # L*a*b*, as the host's
        size = float(max(h, w))
        hull = cv2.convexHull(local[source.mask_points].astype(np.float32)).reshape(-1, 2)
        erode, blur = max(1, int(size * ERODE_FRAC)), max(0.5, size * BLUR_FRAC)
        edge = T.feathered_polygon_mask(h, w, hull, erode, blur, self.device)
        pull = max(erode, 2)  # paste.fade_in
        valid = T.gaussian_blur(texture[3][None, None], blur / 2)[0, 0] * (1.0 / 255.0)
        rest = T.feather(covered, pull, pull / 3.0) * valid
        roi = frame[y0:y1, x0:x1]
        paste = edge * rest
        skin = (paste > 0.5) & S.skin_weight(h, w, local, size, self.device)
        image = S.relight_lab(warped, roi, skin, size, paste)
        mask = seam_feather(edge, hull, erode, image, roi, blur) * rest
        if keep:
            mask = mask * (1.0 - T.region_mask(h, w, local, keep, size, self.device))
        T.blend(roi, image, mask)
        return x0, y0, x1, y1


def seam_feather(narrow: Any, hull: np.ndarray, erode: int, image: Any, roi: Any, blur: float) -> Any:
    """paste.seam_feather on the device: the wide feather where the face and the target differ."""
    import torch.nn.functional as F

    h, w = narrow.shape
    step = SEAM_STEP
    diff = (image[::step, ::step].float() - roi[::step, ::step].float()).abs().mean(dim=2)
    gh, gw = diff.shape
    weight = T.gaussian_blur(diff[None, None], max(0.3, blur / step))[0, 0] * (1.0 / SEAM_DIFF)
    wide = T.feathered_polygon_mask(
        gh, gw, hull / step, int(round(erode * SEAM_WIDEN / step)), blur * SEAM_WIDEN / step, narrow.device
    )
    change = (wide - narrow[::step, ::step]) * weight.clamp(0.0, 1.0)
    out = F.interpolate(change[None, None], size=(h, w), mode="bilinear", align_corners=False)[0, 0]
    return (narrow + out).clamp(0.0, 1.0)
