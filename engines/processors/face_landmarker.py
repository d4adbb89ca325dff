"""MediaPipe FaceMesh (468 points) on eye-levelled square crops, batched across all faces of all frames.

The crop follows MediaPipe's recipe (a square around the detection box, rotated so the eye line is level,
resized to 192, RGB in [0, 1]); a tracked face's crop comes from its previous mesh instead, so the mesh
follows the face between detections. The presence logit tells a real face from a false detection or a face
that left its crop. The converted model has a fixed batch of 1; `engines.onnx.model_cache.serving_model`
rewrites it once (engines.onnx.batch), checks it item by item and caches it, so every face of every frame
runs as one engine call. Without the rewrite `run_batched` simply loops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from engines.engine import Engine, run_batched
from engines.processors.alignment import extent, invert_affine, rotated_square, transform_points
from engines.processors.face_detector import Face

INPUT_SIZE = 192
BOX_SCALE = 1.5  # crop side / detection box side (MediaPipe's RectTransformation scale)
MESH_SCALE = 1.5  # the mesh spans about the detection box, so the same scale
# Mesh indices that stand in for the detector's five points (eye centres, nose tip, mouth corners).
EYE_A = (33, 133)  # subject's right eye: image left
EYE_B = (362, 263)  # subject's left eye: image right
NOSE_TIP = 1
MOUTH_A, MOUTH_B = 61, 291


@dataclass(frozen=True)
class MeshResult:
    landmarks: np.ndarray  # (468, 2) frame coordinates
    presence: float  # probability that the crop holds a face
    # (468,) the model's relative depth per point, in frame pixels (the source's 3-D shape for the shape
    # transfer, engines.processors.face_shape); None where not known
    depth: np.ndarray | None = None


def kps5_from_mesh(points: np.ndarray) -> np.ndarray:
    """The detector's five points, re-derived from a mesh (used to keep a tracked face aligned)."""
    p = points[[*EYE_A, *EYE_B, NOSE_TIP, MOUTH_A, MOUTH_B]]  # one gather: this runs twice per face and frame
    out = np.empty((5, 2), dtype=np.float32)
    out[0] = (p[0] + p[1]) / 2
    out[1] = (p[2] + p[3]) / 2
    out[2:] = p[4:]
    return out


def crop_matrix(face: Face) -> np.ndarray:
    """Frame -> 192 crop affine for one face (from its mesh when tracked, else from its detection box)."""
    eyes = face.kps5[:2]
    angle = float(np.arctan2(eyes[1, 1] - eyes[0, 1], eyes[1, 0] - eyes[0, 0]))
    if face.landmarks is not None:
        box = extent(face.landmarks)
        lo, hi = box[:2], box[2:]
        center = (lo + hi) / 2
        side = float(max(hi - lo)) * MESH_SCALE
    else:
        center = np.array([(face.box[0] + face.box[2]) / 2, (face.box[1] + face.box[3]) / 2])
        side = max(face.width, face.height) * BOX_SCALE
    return rotated_square(center, side, angle, INPUT_SIZE)


def crop_batch(frames: Sequence[np.ndarray], matrices: Sequence[np.ndarray]) -> np.ndarray:
    """The model's input: one 192 crop per (frame, frame -> crop affine), NCHW float32 in [0, 1]."""
    batch = np.empty((len(frames), 3, INPUT_SIZE, INPUT_SIZE), dtype=np.float32)
    for i, (frame, m) in enumerate(zip(frames, matrices, strict=True)):
        crop = cv2.warpAffine(
            frame, m, (INPUT_SIZE, INPUT_SIZE), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT
        )
        for c, plane in enumerate(cv2.split(crop)):  # contiguous planes: no strided transpose copy
            batch[i, c] = plane
    batch *= np.float32(1.0 / 255.0)  # one pass over the whole batch
    return batch


class FaceLandmarker:
    """468-point mesh for many faces at once. Stateless apart from the shared engine: safe across threads."""

    def __init__(self, engine: Engine, presence_threshold: float = 0.5) -> None:
        self.engine = engine
        self.presence_threshold = presence_threshold
        self._input = engine.inputs[0].name if engine.inputs else "input_1"
        names = [o.name for o in engine.outputs]
        self._points_out = "conv2d_20" if "conv2d_20" in names else names[0]
        self._presence_out = "conv2d_30" if "conv2d_30" in names else names[-1]

    def run(self, jobs: Sequence[tuple[np.ndarray, Face]]) -> list[MeshResult]:
        """One mesh per (frame, face) job, in order; all crops go through the engine as one batch."""
        if not jobs:
            return []
        matrices = [crop_matrix(face) for _, face in jobs]
        batch = crop_batch([frame for frame, _ in jobs], matrices)
        out = run_batched(self.engine, {self._input: batch})
        pts = out[self._points_out].reshape(len(jobs), 468, 3)
        logits = out[self._presence_out].reshape(len(jobs))
        presence = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
        results = []
        for i, m in enumerate(matrices):
            inv = invert_affine(m)
            frame_pts = transform_points(pts[i, :, :2].astype(np.float32), inv)
            scale = abs(float(inv[0, 0]) * float(inv[1, 1]) - float(inv[0, 1]) * float(inv[1, 0])) ** 0.5
            results.append(
                MeshResult(
                    landmarks=frame_pts.astype(np.float32),
                    presence=float(presence[i]),
                    depth=(pts[i, :, 2] * scale).astype(np.float32),
                )
            )
        return results

    def is_face(self, mesh: MeshResult) -> bool:
        return mesh.presence >= self.presence_threshold
