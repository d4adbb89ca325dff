"""Identity and liveliness measures for the quality report.

Identity: dlib's ResNet face embedder (CC0, from PyPI's `face-recognition-models`) with dlib's own detector
and aligner, so the measure shares no model with the pipeline it judges. dlib's descriptors lie in one narrow
cone, so cosines are taken after removing a reference mean (`centred`): 1 = same face, ~0 = unrelated, as for
ArcFace. Optional: `pip install 'livefuse[quality]'`. Liveliness: per frame, eye and mouth openness from
FaceMesh landmarks, and what shows inside the target's eye and mouth openings (iris against sclera, the dark
open mouth: lowered lids warped over an open eye show no iris); the target's series against the output's as
Pearson correlation (1 = the output blinks, looks and talks when the target does).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from engines.processors.face_expression import brows_pose
from engines.processors.masks import EYE_LEFT, EYE_RIGHT, INNER_LIPS

INSTALL_HINT = "the identity measure needs dlib and its models: pip install 'livefuse[quality]'"

# FaceMesh points: upper/lower lid pairs and the corners of each eye; the inner lips' middle and corners.
EYE_PAIRS = {"right": ((160, 144), (159, 145), (158, 153)), "left": ((385, 380), (386, 374), (387, 373))}
EYE_CORNERS = {"right": (33, 133), "left": (362, 263)}
MOUTH_PAIRS = ((82, 87), (13, 14), (312, 317))
MOUTH_CORNERS = (78, 308)


class IdentityUnavailable(RuntimeError):
    pass


def _opening(landmarks: np.ndarray, pairs: Sequence[tuple[int, int]], corners: tuple[int, int]) -> float:
    lm = landmarks.astype(np.float64)
    height = float(np.mean([np.linalg.norm(lm[a] - lm[b]) for a, b in pairs]))
    return height / max(float(np.linalg.norm(lm[corners[0]] - lm[corners[1]])), 1e-6)


def openness(landmarks: np.ndarray) -> dict[str, float]:
    """Eye openness (mean of both eyes) and mouth openness, each lid/lip gap over the corner distance; the
    brows' height above their eyes, in eye distances (a raise)."""
    eyes = [_opening(landmarks, EYE_PAIRS[s], EYE_CORNERS[s]) for s in ("right", "left")]
    return {
        "eyes": float(np.mean(eyes)),
        "mouth": _opening(landmarks, MOUTH_PAIRS, MOUTH_CORNERS),
        "brows": float(-brows_pose(landmarks)[:, 1].mean()),
    }


def _inside(shape: tuple[int, ...], landmarks: np.ndarray, rings: Sequence[Sequence[int]]) -> np.ndarray:
    mask = np.zeros(shape[:2], np.uint8)
    cv2.fillPoly(mask, [np.round(landmarks[list(r)] * 16).astype(np.int32) for r in rings], 255, shift=4)
    return mask > 0


def appearance(image: np.ndarray, landmarks: np.ndarray) -> dict[str, float]:
    """Inside the openings that `landmarks` (the target's) draw on `image`: the grey-level standard deviation
    in the eyes (iris against sclera; ~0 over a closed lid) and the mouth's darkness (255 - mean grey)."""
    grey = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY).astype(np.float64)
    eyes = _inside(grey.shape, landmarks, (EYE_RIGHT, EYE_LEFT))
    mouth = _inside(grey.shape, landmarks, (INNER_LIPS,))
    return {
        "eyes": float(grey[eyes].std()) if eyes.sum() > 2 else 0.0,
        "mouth": 255.0 - float(grey[mouth].mean()) if mouth.any() else 0.0,
    }


def correlation(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Pearson correlation of two equally long series; None when either does not move."""
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if x.size != y.size or x.size < 3 or x.std() < 1e-9 or y.std() < 1e-9:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def centred_cosine(a: np.ndarray, b: np.ndarray, mean: np.ndarray) -> float:
    x, y = a - mean, b - mean
    return float(x @ y / max(float(np.linalg.norm(x) * np.linalg.norm(y)), 1e-12))


def _model_dir() -> Path:
    """The model files inside the face-recognition-models package, found without importing it (its
    __init__ needs pkg_resources, which recent setuptools no longer ships)."""
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        raise IdentityUnavailable(INSTALL_HINT)
    models = Path(next(iter(spec.submodule_search_locations))) / "models"
    if not (models / "dlib_face_recognition_resnet_model_v1.dat").is_file():
        raise IdentityUnavailable(INSTALL_HINT)
    return models


class FaceRecognizer:
    """dlib's face embedder. Blocking; one instance per thread (dlib's objects are not shared)."""

    def __init__(self) -> None:
        try:
            import dlib
        except ImportError:
            raise IdentityUnavailable(INSTALL_HINT) from None
        models = _model_dir()
        self._dlib: Any = dlib
        self._detector = dlib.get_frontal_face_detector()
        self._aligner = dlib.shape_predictor(str(models / "shape_predictor_5_face_landmarks.dat"))
        self._net = dlib.face_recognition_model_v1(str(models / "dlib_face_recognition_resnet_model_v1.dat"))

    def _rectangle(self, image: np.ndarray, box: np.ndarray | None) -> Any:
        """dlib's own detection (what its aligner was trained on) nearest `box`, looked for around `box`
        only; `box` itself when dlib's detector misses the face (turned heads, small faces)."""
        if box is None:
            found = list(self._detector(image, 1))
            return max(found, key=lambda r: r.area()) if found else None
        x0, y0, x1, y1 = (float(v) for v in box[:4])
        pad = 0.5 * max(x1 - x0, y1 - y0)
        cx0, cy0 = max(int(x0 - pad), 0), max(int(y0 - pad), 0)
        cx1, cy1 = min(int(x1 + pad), image.shape[1]), min(int(y1 + pad), image.shape[0])
        crop = np.ascontiguousarray(image[cy0:cy1, cx0:cx1])
        upsample = 1 if max(x1 - x0, y1 - y0) < 120 else 0  # HOG's window is 80 px
        rects = list(self._detector(crop, upsample)) if crop.size else []
        found = [(r.left() + cx0, r.top() + cy0, r.right() + cx0, r.bottom() + cy0) for r in rects]

        def iou(r: tuple[int, int, int, int]) -> float:
            ix = max(0.0, min(x1, r[2]) - max(x0, r[0]))
            iy = max(0.0, min(y1, r[3]) - max(y0, r[1]))
            inter = ix * iy
            return inter / ((x1 - x0) * (y1 - y0) + (r[2] - r[0]) * (r[3] - r[1]) - inter)

        best = max(found, key=iou, default=None)
        if best is not None and iou(best) > 0.3:
            return self._dlib.rectangle(*best)
        return self._dlib.rectangle(int(round(x0)), int(round(y0)), int(round(x1)), int(round(y1)))

    def embed(self, image: np.ndarray, box: np.ndarray | None = None) -> np.ndarray | None:
        """The 128-d descriptor of the face at `box` (x0, y0, x1, y1) in an RGB uint8 image (the largest face
        when `box` is None); None when there is no face."""
        rgb = np.ascontiguousarray(image, dtype=np.uint8)
        rect = self._rectangle(rgb, box)
        if rect is None:
            return None
        shape = self._aligner(rgb, rect)
        return np.asarray(self._net.compute_face_descriptor(rgb, shape), dtype=np.float64)
