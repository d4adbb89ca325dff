"""ArcFace (w600k_r50) identity embedding: the source vector inswapper conditions on.

Faces are aligned to the 112 ArcFace template from their five points, RGB, (x - 127.5) / 127.5, NCHW; the
output (N, 512) is L2-normalised (InsightFace's `normed_embedding`). Tensor names are read from the file
(buffalo_l's export says "input.1"/"683"; re-exports rename them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engines.engine import Engine, run_batched
from engines.processors.alignment import ARCFACE_112_V2, estimate_affine, warp_crop

SIZE = 112


class ArcFaceEmbedder:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._input = engine.inputs[0].name if engine.inputs else "input.1"

    def embed(self, jobs: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """(N, 512) unit vectors for (frame RGB, kps5) jobs, one engine batch."""
        if not jobs:
            return np.zeros((0, 512), dtype=np.float32)
        batch = np.empty((len(jobs), 3, SIZE, SIZE), dtype=np.float32)
        for i, (image, kps5) in enumerate(jobs):
            crop = warp_crop(image, estimate_affine(kps5, ARCFACE_112_V2, SIZE), SIZE)
            batch[i] = (crop.astype(np.float32).transpose(2, 0, 1) - 127.5) / 127.5
        out = next(iter(run_batched(self.engine, {self._input: batch}).values()))
        out = out.reshape(len(jobs), -1).astype(np.float32)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
