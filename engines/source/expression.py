"""The source's expression partition, read once per source from its mesh at rest: each mesh point's weight
toward the mouth's anchor and in each brow's raise (engines.processors.face_expression uses it every frame).

The mouth's weight is full on the lips and falls off smoothly over the cheeks and the upper lip's skin,
further across the face than up or down, so the nose and the chin stay identity; each brow's is full on the
brow and falls off over the forehead and down to the lid. The outline, the nose and the eyes weigh 0.
"""

from __future__ import annotations

import numpy as np

from engines.processors.masks import EYE_LEFT, EYE_RIGHT, INNER_LIPS, OUTER_LIPS
from engines.source.validity import FACE_OVAL, NOSE

LIPS = tuple(sorted(set(INNER_LIPS) | set(OUTER_LIPS)))
# FaceMesh's brows (upper and lower edges), image left (the subject's right) then image right
BROW_RIGHT = (70, 63, 105, 66, 107, 46, 53, 52, 65, 55)
BROW_LEFT = (300, 293, 334, 296, 336, 276, 283, 282, 295, 285)
EYE_CORNERS = ((33, 133), (362, 263))
MOUTH_REACH = 0.42  # the mouth's falloff across the face, a fraction of the eye centres' distance...
MOUTH_REACH_DOWN = 0.5  # ...and up / down, this fraction of that (the nose and the chin stay identity)
BROW_REACH = 0.2  # the brows' falloff, a fraction of the eye centres' distance
CORNERS = (61, 78, 291, 308)  # the mouth's corners, outer and inner
CORNER_REACH = 0.15  # the corners' own falloff (see `split`), a fraction of the eye centres' distance
INNER_HOLD = 1.0  # how much of the inner lips' offset also holds up and down (1: the opening is the target's)


def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return np.asarray(x * x * (3.0 - 2.0 * x))


def _falloff(points: np.ndarray, core: tuple[int, ...], reach: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """1 on the `core` points, falling smoothly to 0 at `reach` (across, down, depth: px) from the nearest
    one, measured along `axes` (3, 3)."""
    local = (points - points[list(core)].mean(0)) @ axes.T / reach
    d = np.sqrt(((local[:, None, :] - local[None, list(core), :]) ** 2).sum(2)).min(1)
    w = _smoothstep(1.0 - d)
    w[list(core)] = 1.0
    return w


def expression_weights(points: np.ndarray) -> np.ndarray:
    """(468, 4): weights toward the mouth's, the image-left brow's and the image-right brow's anchor, and
    the corners' share (how much of the mouth's weight also holds up and down), read from a 3-D mesh at
    rest (468, 3) in pixels (measured in the face's own frame: a turned source gives the same partition):
    the first three sum to at most 1; the outline, the nose and the eyes are 0 (identity)."""
    p = np.asarray(points, dtype=np.float64)
    eyes = [p[list(pair)].mean(0) for pair in EYE_CORNERS]
    span = max(float(np.linalg.norm(eyes[1] - eyes[0])), 1e-6)
    across = (eyes[1] - eyes[0]) / span
    down = p[list(LIPS)].mean(0) - (eyes[0] + eyes[1]) / 2.0
    down -= (down @ across) * across
    down /= max(float(np.linalg.norm(down)), 1e-6)
    axes = np.stack([across, down, np.cross(across, down)])
    mouth = span * MOUTH_REACH * np.array([1.0, MOUTH_REACH_DOWN, 1.0])
    weights = np.zeros((len(p), 4))
    weights[:, 0] = _falloff(p, LIPS, mouth, axes)
    for k, brow in enumerate((BROW_RIGHT, BROW_LEFT)):
        weights[:, 1 + k] = _falloff(p, brow, span * np.full(3, BROW_REACH), axes)
    weights[list(FACE_OVAL) + list(NOSE) + list(EYE_RIGHT) + list(EYE_LEFT), :3] = 0.0
    weights[:, :3] /= np.maximum(weights[:, :3].sum(1, keepdims=True), 1.0)
    weights[:, 3] = _falloff(p, CORNERS, span * np.full(3, CORNER_REACH), axes)
    weights[list(INNER_LIPS), 3] = np.maximum(weights[list(INNER_LIPS), 3], INNER_HOLD)
    return weights
