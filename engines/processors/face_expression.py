"""The shape offset's identity part, per frame: the target's expression kept, by a fixed mesh partition and
the brows' running rest.

Why: the source's shape (face_shape) is its 3-D mesh at rest against the target's tracked mesh, so all the
target's face does reads as a difference too: at full strength a smile was squeezed to a closed-mouth source's
width. `split` draws each mouth point's offset toward the lips' mean (weights: engines.source.expression):
the mouth keeps the target's width, corners and opening at the source's placement. The brows take the
source's height and arch and keep the target's raise: the offset is read against the target with its raise
taken out (`at_rest`), the raise being each brow's pose (`brows_pose`) against the session's running rest
(`follow_rest`, kept by the tracker); a still picture has no history, so its brows are the source's.
"""

from __future__ import annotations

import math

import numpy as np

from engines.source.expression import BROW_LEFT, BROW_RIGHT, EYE_CORNERS, LIPS

BROWS = (BROW_RIGHT, BROW_LEFT)  # image left (the subject's right) then image right; EYE_CORNERS' order
REST_SECONDS = 4.0  # the brows' rest: their pose's running mean over about this long (a raise shows whole
# at once and fades into the rest only when held for seconds)


def _frame(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, list[np.ndarray]]:
    """The eye line's direction (unit), the direction down it, the eye centres' distance and each eye's
    corners' mean."""
    eyes = [(points[a] + points[b]) / 2.0 for a, b in EYE_CORNERS]
    line = eyes[1] - eyes[0]
    span = max(float(np.hypot(line[0], line[1])), 1e-6)
    across = line / span
    return across, np.array([-across[1], across[0]]), span, eyes


def _pose(
    points: np.ndarray, across: np.ndarray, down: np.ndarray, span: float, eyes: list[np.ndarray]
) -> np.ndarray:
    rel = np.stack([points[list(brow)].mean(0) - eye for brow, eye in zip(BROWS, eyes, strict=True)])
    return np.stack([rel @ across, rel @ down], axis=1) / span


def brows_pose(points: np.ndarray) -> np.ndarray:
    """(2, 2): each brow's mean point less its eye's corners' mean, in the face's own frame (along the eye
    line, then down it) and in eye distances: the same for a face moved, turned in the image or scaled."""
    p = np.asarray(points, dtype=np.float64)
    return _pose(p, *_frame(p))


def brows_raise(points: np.ndarray, rest: np.ndarray | None) -> np.ndarray:
    """(2, 2) px: how far each brow stands from its rest pose now (0 without a rest)."""
    if rest is None:
        return np.zeros((2, 2))
    p = np.asarray(points, dtype=np.float64)
    across, down, span, eyes = _frame(p)
    d = (_pose(p, across, down, span, eyes) - rest) * span
    return np.asarray(d[:, :1] * across + d[:, 1:] * down)


def follow_rest(rest: np.ndarray | None, pose: np.ndarray, dt: float) -> np.ndarray:
    """The brows' rest moved toward this frame's pose by a running mean over REST_SECONDS (the first pose
    is the rest)."""
    if rest is None:
        return np.array(pose, dtype=np.float64)
    a = 1.0 - math.exp(-max(dt, 0.0) / REST_SECONDS)
    return np.asarray(rest + a * (pose - rest))


def at_rest(target: np.ndarray, weights: np.ndarray, rest: np.ndarray | None) -> np.ndarray:
    """The target (468, 2) with its brows' raise taken out (each point by its brows' weights, `weights`
    (468, 4) as engines.source.expression gives): the face the source's shape is read against, so the
    offset carries the source's brows at rest and the target's pixels keep their raise."""
    t = np.asarray(target, dtype=np.float64)
    if rest is None:
        return t
    return np.asarray(t - weights[:, 1:3] @ brows_raise(t, rest))


def split(offset: np.ndarray, weights: np.ndarray, across: np.ndarray) -> np.ndarray:
    """The offset's identity part (468, 2) with the target's mouth: each mouth point drawn toward the lips'
    mean offset by its weight, only along `across` (the eye line, a unit vector) but at its corners: the
    mouth's width and its corners follow the target, the lips' height at rest (their fullness) stays the
    source's; the opening is the target's already (face_shape.restore_expression). Points of weight 0 keep
    their own offset."""
    lips = offset[list(LIPS)].mean(0)
    out = np.array(offset, dtype=np.float64)
    pull = weights[:, 0, None] * (lips - offset)
    along = pull @ across
    down = np.array([-across[1], across[0]])
    out += along[:, None] * across + (weights[:, 3] * (pull @ down))[:, None] * down
    return out
