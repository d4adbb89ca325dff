"""The quality report's teeth count: teeth inside the target's opening, followed to where the output's mouth
moved; the pale skin around a mouth is not counted, and teeth covered by lips are missed."""

from __future__ import annotations

import cv2
import numpy as np

from bench.quality.expression_section import mouth_measure
from engines.processors.masks import INNER_LIPS, OUTER_LIPS


def _face() -> tuple[np.ndarray, np.ndarray]:
    """A pale face (bright, grey: teeth-like) with a smile: a dark lip band around a bright opening."""
    image = np.full((160, 160, 3), (205, 200, 195), np.uint8)
    lm = np.zeros((468, 2), np.float64)
    lm[33], lm[263] = (50, 60), (110, 60)
    t = np.linspace(0, 2 * np.pi, len(INNER_LIPS), endpoint=False)
    lm[list(INNER_LIPS)] = np.stack([80 + 24 * np.cos(t), 110 + 7 * np.sin(t)], 1)
    lm[list(OUTER_LIPS)] = np.stack([80 + 30 * np.cos(t), 110 + 13 * np.sin(t)], 1)
    lm[61], lm[291] = lm[OUTER_LIPS[0]], lm[OUTER_LIPS[10]]
    cv2.fillPoly(image, [np.round(lm[list(OUTER_LIPS)]).astype(np.int32)], (150, 60, 70))
    cv2.fillPoly(image, [np.round(lm[list(INNER_LIPS)]).astype(np.int32)], (240, 240, 236))
    return image, lm


def test_teeth_follow_a_moved_mouth_and_skin_does_not_count() -> None:
    target, lm = _face()
    m = mouth_measure(target, lm, target, lm)
    assert m["teeth_kept"] == 1.0 and m["mouth_width_ratio"] == 1.0
    # the whole mouth moved 3 px (the source's placement): every tooth is still there
    moved = np.asarray(cv2.warpAffine(target, np.array([[1.0, 0, 2], [0, 1, 3]]), (160, 160)))
    moved[:3], moved[:, :2] = target[:3], target[:, :2]
    assert mouth_measure(target, lm, moved, lm + (2, 3))["teeth_kept"] > 0.97
    # the source's lips laid over the upper half of the opening: about half the teeth are lost
    covered = target.copy()
    teeth = np.all(target == (240, 240, 236), axis=2)
    teeth[int(round(lm[list(INNER_LIPS)][:, 1].mean())) :] = False
    covered[teeth] = (150, 60, 70)
    kept = mouth_measure(target, lm, covered, lm)["teeth_kept"]
    assert 0.35 < kept < 0.65
    # the lips taken away (pale skin, as bright and grey as teeth, around the opening): no teeth gained
    bare = target.copy()
    bare[np.all(target == (150, 60, 70), axis=2)] = (205, 200, 195)
    assert mouth_measure(target, lm, bare, lm)["teeth_kept"] <= 1.0
