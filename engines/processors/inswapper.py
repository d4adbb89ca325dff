"""InsightFace inswapper_128 (user-supplied weights), batched across faces.

Target faces are aligned to the 128 ArcFace v2 template from their five points (RGB, /255, NCHW; FaceFusion's
preprocessing). The source identity follows InsightFace's `INSwapper.get`: `normalize(normed_embedding @
emap)`, where `emap` is the swapper model's last graph initializer (512x512). (FaceFusion instead divides the
raw embedding's product by the raw embedding's norm; the direction is the same, the scale is not.) Output
(N, 3, 128, 128) RGB in [0, 1] is pasted back with the inverse affine through FaceFusion's box mask of the
aligned crop, times a feathered mask of the target regions kept (Deep-Live-Cam's mouth mask; the eyes too
by default). The published model has batch 1: the pipeline loads a `make_batch_dynamic` copy so faces batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engines.engine import Engine, run_batched
from engines.processors.alignment import ARCFACE_128_V2, estimate_affine, transform_points, warp_crop
from engines.processors.arcface import ArcFaceEmbedder
from engines.processors.face_detector import Face
from engines.processors.masks import BoxMaskConfig, box_mask, paste_mask, region_mask
from engines.processors.paste import FacePatch

SIZE = 128


def load_emap(model_path: Path) -> np.ndarray:
    """The swapper's embedding map: its graph's last initializer (how InsightFace and FaceFusion read it)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(model_path))
    emap = numpy_helper.to_array(model.graph.initializer[-1]).astype(np.float32)
    if emap.shape != (512, 512):
        raise ValueError(f"{model_path.name}: last initializer has shape {emap.shape}, expected (512, 512)")
    return emap


class InswapperSwapper:
    """Stateless apart from shared engines and the read-only emap: safe across threads."""

    name = "inswapper_128"

    def __init__(
        self, engine: Engine, embedder: ArcFaceEmbedder, emap: np.ndarray, mask: BoxMaskConfig | None = None
    ) -> None:
        self.engine = engine
        self.embedder = embedder
        self.emap = emap
        self.mask = mask or BoxMaskConfig()
        self._box_mask = box_mask(SIZE, self.mask)

    def source_latent(self, image: np.ndarray, kps5: np.ndarray) -> np.ndarray:
        """(512,) identity latent of a source face, computed once per source."""
        return self.latent_of(self.embedder.embed([(image, kps5)])[0])

    def latent_of(self, embedding: np.ndarray) -> np.ndarray:
        """(512,) identity latent of a face's (512,) ArcFace embedding."""
        latent = embedding @ self.emap
        return (latent / max(float(np.linalg.norm(latent)), 1e-12)).astype(np.float32)

    def swap(
        self,
        jobs: Sequence[tuple[np.ndarray, Face, np.ndarray]],
        keep: Sequence[tuple[str, ...]] | None = None,
    ) -> list[FacePatch]:
        """One patch per (frame, target face, source latent) job; all faces in one engine batch. `keep[i]`:
        the target regions job i keeps (needs the face's landmarks)."""
        if not jobs:
            return []
        matrices = [estimate_affine(face.kps5, ARCFACE_128_V2, SIZE) for _, face, _ in jobs]
        target = np.empty((len(jobs), 3, SIZE, SIZE), dtype=np.float32)
        for i, ((frame, _, _), m) in enumerate(zip(jobs, matrices, strict=True)):
            target[i] = warp_crop(frame, m, SIZE).transpose(2, 0, 1).astype(np.float32) * (1.0 / 255.0)
        source = np.stack([latent for _, _, latent in jobs]).astype(np.float32)
        out = run_batched(self.engine, {"target": target, "source": source})
        faces = next(iter(out.values()))
        patches = []
        for i, m in enumerate(matrices):
            image = np.clip(faces[i].transpose(1, 2, 0), 0.0, 1.0) * 255.0
            face = jobs[i][1]
            regions = keep[i] if keep else ()
            mask = keep_regions_out(paste_mask(face.box, m, self._box_mask), face, m, regions)
            patches.append(FacePatch(image=image.astype(np.float32), mask=mask, matrix=m))
        return patches


def keep_regions_out(
    mask: np.ndarray, face: Face, matrix: np.ndarray, regions: tuple[str, ...]
) -> np.ndarray:
    """`mask` (aligned crop) with the face's kept target regions cut out (a new array; `mask` is shared)."""
    if not regions or face.landmarks is None:
        return mask
    size = mask.shape[0]
    pts = transform_points(face.landmarks.astype(np.float32), matrix)
    scale = float(np.hypot(matrix[0, 0], matrix[0, 1]))
    keep = region_mask((size, size), pts, regions, face_size=max(face.width, face.height) * scale)
    return mask * (1.0 - keep)
