"""The shape offset split into identity and expression, by a fixed partition of the mesh.

Why: the source's shape (engines.processors.face_shape) is the difference between its 3-D mesh at rest and
the target's tracked mesh, so everything the target's face *does* reads as a difference too: a smile widens
the mouth and lifts the cheeks, a talking mouth rounds and stretches its lips, a raised brow rises. Taken at
full strength, the offset squeezed a smiling target's mouth to the closed-mouth source's width. Identity is
the outline and jaw, the nose, the eyes' placement and the proportions between them; the mouth's width,
corners and opening, the cheeks beside it and the brows' height are the target's, frame by frame.

The partition is read once per source, from its own mesh at rest (`expression_weights`): each mesh point
gets a weight toward one of three anchors, the mouth (full on the lips, falling off smoothly over the cheeks
and the upper lip's skin, further across the face than up or down so that the nose and the chin stay
identity) and each brow (full on the brow, falling off over the forehead and down to the lid). Per frame
(`split`), a point's offset is drawn toward its anchor's offset by its weight: the mouth's anchor is the
lips' mean offset, so the mouth moves as one to the source's mouth placement (the nose-to-mouth and
mouth-to-chin proportions are identity) and keeps the target's width and corners (across the face, and at
the corners up and down too: a smile lifts them), while the lips' height at rest, their fullness, stays
the source's (drawn to the mouth's anchor up and down too, the identity margin fell by a further 0.06 on
the report's cases); each brow's anchor is its eye's (the eye moves whole to the source's eye centre,
face_shape.restore_expression), so a brow keeps its height above the eye and its arch from the target.
The outline, jaw, nose and eye placement keep their offset in full. The step is a few means and products
over the 468 points per face (about 0.03 ms).
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
