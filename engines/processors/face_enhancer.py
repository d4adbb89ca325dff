"""Face enhancers, run on the (swapped) face region only.

- "detail" (the weight-free default): a two-scale unsharp mask — fine detail plus local contrast — inside a
  feathered ellipse over the face. Real per-face work that visibly sharpens, so the pipeline's enhancer stage
  has an honest cost when no restoration weights are installed.
- "gfpgan_1.4" (user-supplied ONNX): the face aligned to the 512 FFHQ template from its five points, RGB
  normalised to [-1, 1], (N, 3, 512, 512) in and out, batched across faces, pasted back through
  FaceFusion's box mask of the aligned crop (built once: no costly per-face erosion of a 512 mask).

Both return `FacePatch`es whose masks already carry the blend factor (how much of the enhanced face to keep).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from engines.engine import Engine, run_batched
from engines.processors.alignment import FFHQ_512, estimate_affine, warp_crop
from engines.processors.face_detector import Face
from engines.processors.masks import BoxMaskConfig, box_mask, paste_mask
from engines.processors.paste import FacePatch, translation

GFPGAN_SIZE = 512


class DetailEnhancer:
    name = "detail"

    def __init__(self, blend: float = 0.8, fine: float = 0.8, contrast: float = 0.4) -> None:
        self.blend = blend
        self.fine = fine
        self.contrast = contrast

    def enhance(self, jobs: Sequence[tuple[np.ndarray, Face]]) -> list[FacePatch | None]:
        return [self.enhance_one(frame, face) for frame, face in jobs]

    def enhance_one(self, frame: np.ndarray, face: Face) -> FacePatch | None:
        fh, fw = frame.shape[:2]
        x0, y0 = max(int(np.floor(face.box[0])), 0), max(int(np.floor(face.box[1])), 0)
        x1, y1 = min(int(np.ceil(face.box[2])), fw), min(int(np.ceil(face.box[3])), fh)
        if x1 - x0 < 4 or y1 - y0 < 4:
            return None
        roi = frame[y0:y1, x0:x1].astype(np.float32)
        size = float(max(x1 - x0, y1 - y0))
        fine = cv2.GaussianBlur(roi, (0, 0), max(0.8, size / 150))
        coarse = cv2.GaussianBlur(roi, (0, 0), max(2.0, size / 25))
        sharp = roi + self.fine * (roi - fine) + self.contrast * (roi - coarse)
        np.clip(sharp, 0, 255, out=sharp)
        h, w = roi.shape[:2]
        mask = np.zeros((h, w), dtype=np.float32)
        axes = (max(1, int(w * 0.42)), max(1, int(h * 0.45)))
        cv2.ellipse(mask, (w // 2, h // 2), axes, 0, 0, 360, 1.0, -1)
        mask = cv2.GaussianBlur(mask, (0, 0), max(1.0, size * 0.05)) * self.blend
        return FacePatch(image=sharp, mask=mask, matrix=translation(x0, y0))


class GfpganEnhancer:
    name = "gfpgan_1.4"

    def __init__(self, engine: Engine, blend: float = 0.8, mask: BoxMaskConfig | None = None) -> None:
        self.engine = engine
        self.blend = blend
        self.mask = mask or BoxMaskConfig()
        self.base_mask = box_mask(GFPGAN_SIZE, self.mask)  # read-only, shared by every face
        self.input_name = engine.inputs[0].name if engine.inputs else "input"

    def enhance(self, jobs: Sequence[tuple[np.ndarray, Face]]) -> list[FacePatch | None]:
        if not jobs:
            return []
        matrices = [estimate_affine(face.kps5, FFHQ_512, GFPGAN_SIZE, robust=True) for _, face in jobs]
        batch = np.empty((len(jobs), 3, GFPGAN_SIZE, GFPGAN_SIZE), dtype=np.float32)
        for i, ((frame, _), m) in enumerate(zip(jobs, matrices, strict=True)):
            crop = warp_crop(frame, m, GFPGAN_SIZE).astype(np.float32)
            batch[i] = (crop.transpose(2, 0, 1) / 255.0 - 0.5) / 0.5
        out = next(iter(run_batched(self.engine, {self.input_name: batch}).values()))
        patches: list[FacePatch | None] = []
        for i, m in enumerate(matrices):
            image = (np.clip(out[i].transpose(1, 2, 0), -1.0, 1.0) + 1.0) * 127.5
            mask = paste_mask(jobs[i][1].box, m, self.base_mask) * self.blend
            patches.append(FacePatch(image=image.astype(np.float32), mask=mask, matrix=m))
        return patches
