"""The shape offset's identity part, per frame: the target's expression kept, by a fixed mesh partition.

Why: the source's shape (face_shape) is the difference between its 3-D mesh at rest and the target's tracked
mesh, so everything the target's face does reads as a difference too: a smile widens the mouth, a raised
brow rises; at full strength the offset squeezed a smiling target's mouth to a closed-mouth source's width.
Identity is the outline and jaw, the nose, the eyes' placement and the proportions between them; the mouth's
width, corners and opening, the cheeks beside it and the brows' height are the target's, frame by frame.
`split` draws each point's offset toward its anchor's by its weight (engines.source.expression, read once per
source): toward the lips' mean, so the mouth moves as one to the source's placement and keeps the target's
width and corners while the lips' fullness stays the source's; toward its eye's, for each brow, so it keeps
its height above the eye and its arch from the target.
"""

from __future__ import annotations

import numpy as np

from engines.source.expression import EYE_CORNERS, LIPS


def split(offset: np.ndarray, weights: np.ndarray, across: np.ndarray) -> np.ndarray:
    """The offset's identity part (468, 2): each point drawn toward its anchor's offset (the lips' mean,
    each eye's corners' mean) by its weight. On the mouth, only along `across` (the eye line, a unit
    vector) but at its corners: the mouth's width and its corners follow the target, the lips' height at
    rest (their fullness) stays the source's; the opening is the target's already
    (face_shape.restore_expression). Points of weight 0 keep their own offset."""
    lips = offset[list(LIPS)].mean(0)
    eyes = [(offset[a] + offset[b]) / 2.0 for a, b in EYE_CORNERS]
    out = np.array(offset, dtype=np.float64)
    for k, anchor in enumerate(eyes):
        out += weights[:, 1 + k, None] * (anchor - offset)
    pull = weights[:, 0, None] * (lips - offset)
    along = pull @ across
    down = np.array([-across[1], across[0]])
    out += along[:, None] * across + (weights[:, 3] * (pull @ down))[:, None] * down
    return out
