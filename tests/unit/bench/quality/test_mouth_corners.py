"""The quality report's mouth width by the target's own corners: the target itself reads 1.00, a
mouth moved a few pixels is found where it went, a wider or narrower mouth reads its width to within 1 %
(under a pixel of the corners' distance), and a mouth whose patch would leave the picture gives no reading."""

from __future__ import annotations

import cv2
import numpy as np

from bench.quality.mouth_corners import MOUTH_CORNERS, matched_corners, mouth_width, width_ratio
from engines.processors.masks import INNER_LIPS, OUTER_LIPS


def _face(width: float = 30.0, centre: tuple[float, float] = (80.0, 110.0)) -> tuple[np.ndarray, np.ndarray]:
    """A face with a smile `2 * width` px wide: a dark lip band around a bright opening, on skin with a
    little texture (a chin line, a nose) so the corners' patches are not all alike."""
    image = np.full((160, 160, 3), (205, 170, 150), np.uint8)
    cv2.line(image, (40, 150), (120, 150), (170, 130, 110), 2)
    cv2.circle(image, (80, 75), 8, (185, 150, 130), -1)
    lm = np.zeros((468, 2), np.float64)
    t = np.pi + np.linspace(0, 2 * np.pi, len(INNER_LIPS), endpoint=False)  # 61 and 78 on the image left
    cx, cy = centre
    lm[list(INNER_LIPS)] = np.stack([cx + (width - 6) * np.cos(t), cy + 7 * np.sin(t)], 1)
    lm[list(OUTER_LIPS)] = np.stack([cx + width * np.cos(t), cy + 13 * np.sin(t)], 1)
    cv2.fillPoly(image, [np.round(lm[list(OUTER_LIPS)] * 16).astype(np.int32)], (150, 60, 70), shift=4)
    cv2.fillPoly(image, [np.round(lm[list(INNER_LIPS)] * 16).astype(np.int32)], (240, 240, 236), shift=4)
    return image, lm


def test_the_target_itself_reads_one() -> None:
    image, lm = _face()
    corners = matched_corners(image, lm, image)
    assert corners is not None
    assert np.abs(corners - lm[list(MOUTH_CORNERS)]).max() < 0.1  # the peak's sub-pixel fit
    assert abs(width_ratio(lm, corners) - 1.0) < 0.002


def test_a_moved_mouth_is_found_where_it_went() -> None:
    target, lm = _face()
    moved, _ = _face(centre=(82.0, 113.0))
    corners = matched_corners(target, lm, moved)
    assert corners is not None
    assert np.abs(corners - (lm[list(MOUTH_CORNERS)] + (2.0, 3.0))).max() < 0.5
    assert abs(width_ratio(lm, corners) - 1.0) < 0.01


def test_a_wider_or_narrower_mouth_reads_its_width() -> None:
    target, lm = _face(30.0)
    for width in (27.0, 33.0):
        output, out_lm = _face(width)
        corners = matched_corners(target, lm, output)
        assert corners is not None
        want = mouth_width(out_lm) / mouth_width(lm)
        assert abs(width_ratio(lm, corners) - want) < 0.01, (width, width_ratio(lm, corners), want)


def test_no_reading_at_the_pictures_edge() -> None:
    image, lm = _face(centre=(36.0, 110.0))
    assert matched_corners(image, lm, image) is None
