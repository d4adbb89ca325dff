"""Kept target regions on a real mesh (the astronaut, twice her size): the eyes stay inside the lids, the eye
area reaches over them, a closed eye keeps nothing, and each region's box-limited blur draws what a whole-mask
blur drew."""

from __future__ import annotations

import cv2
import numpy as np

from engines.pipeline import Pipeline
from engines.processors.masks import EYE_LEFT, EYE_RIGHT, FEATHER, GROW, _polys, region_mask


def _mesh(pipeline: Pipeline, image: np.ndarray) -> np.ndarray:
    face = max(pipeline.detect([image])[0], key=lambda f: f.area)
    return pipeline.landmarker.run([(image, face)])[0].landmarks.astype(np.float64)


def _ring(shape: tuple[int, int], lm: np.ndarray, grow: int) -> np.ndarray:
    m = np.zeros(shape, np.uint8)
    cv2.fillPoly(m, [np.round(lm[list(r)]).astype(np.int32) for r in (EYE_RIGHT, EYE_LEFT)], 255)
    k = np.ones((2 * abs(grow) + 1,) * 2, np.uint8)
    return (cv2.dilate(m, k) if grow > 0 else cv2.erode(m, k)) > 0


def test_eyes_stay_inside_the_lids_and_the_eye_area_covers_them(
    pipeline: Pipeline, astronaut: np.ndarray
) -> None:
    big = cv2.resize(astronaut, (1024, 1024), interpolation=cv2.INTER_CUBIC)
    lm = _mesh(pipeline, big)
    shape = big.shape[:2]
    size = float(max(np.ptp(lm[:, 0]), np.ptp(lm[:, 1])))
    eyes = region_mask(shape, lm, ("eyes",), size)
    area = region_mask(shape, lm, ("eye_area",), size)
    core = _ring(shape, lm, -2)  # well inside the openings: iris and sclera
    lids = _ring(shape, lm, 5) & ~_ring(shape, lm, 1)  # a band over the lids and lashes
    assert core.sum() > 100 and lids.sum() > 200
    assert eyes[core].mean() > 0.95 and area[core].mean() > 0.99
    assert eyes[lids].mean() < 0.1 and area[lids].mean() > 0.7
    assert eyes[~_ring(shape, lm, 8)].max() < 0.01  # nothing beyond the eyes
    # a closed eye (upper lid on the lower): nothing of it kept
    closed = lm.copy()
    upper = [159, 158, 157, 160, 161, 386, 385, 384, 387, 388]
    lower = [145, 153, 154, 144, 163, 374, 380, 381, 373, 390]
    closed[upper] = closed[lower]
    assert region_mask(shape, closed, ("eyes",), size)[core].max() < 0.3


def test_box_limited_blur_draws_what_a_whole_mask_blur_drew(
    pipeline: Pipeline, astronaut: np.ndarray
) -> None:
    lm = _mesh(pipeline, astronaut)
    shape = astronaut.shape[:2]
    size = float(max(np.ptp(lm[:, 0]), np.ptp(lm[:, 1])))
    for region in ("mouth", "eyes", "eye_area"):
        filled = np.zeros(shape, np.uint8)
        cv2.fillPoly(
            filled,
            _polys(
                lm,
                (
                    (EYE_RIGHT, EYE_LEFT)
                    if "eye" in region
                    else (
                        (
                            78,
                            95,
                            88,
                            178,
                            87,
                            14,
                            317,
                            402,
                            318,
                            324,
                            308,
                            415,
                            310,
                            311,
                            312,
                            13,
                            82,
                            81,
                            80,
                            191,
                        ),
                    )
                ),
            ),
            255,
            lineType=cv2.LINE_8,
            shift=4,
        )
        grow = int(round(size * GROW[region]))
        k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * abs(grow) + 1,) * 2)
        filled = cv2.dilate(filled, k) if grow > 0 else cv2.erode(filled, k) if grow < 0 else filled
        whole = cv2.GaussianBlur(filled.astype(np.float32) / 255.0, (0, 0), max(0.5, size * FEATHER[region]))
        assert np.abs(region_mask(shape, lm, (region,), size) - whole).max() < 0.01, region
