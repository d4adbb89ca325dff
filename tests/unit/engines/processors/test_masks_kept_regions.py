"""Kept target regions on a real mesh (the astronaut, twice her size): the eyes stay inside the lids, the eye
area reaches over them, a closed eye keeps nothing, a smile's whole opening is kept at full strength with the
feather out on the lips, a closed mouth grows less than a smile, and each region's box-limited blur draws what
a whole-mask blur drew."""

from __future__ import annotations

import cv2
import numpy as np

from engines.pipeline import Pipeline
from engines.processors.masks import (
    EYE_LEFT,
    EYE_RIGHT,
    FEATHER,
    GROW,
    INNER_LIPS,
    MOUTH_CLOSED_GROW,
    MOUTH_OPEN,
    OUTER_LIPS,
    mouth_opening,
    region_grow,
    region_mask,
    region_rings,
)


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
    # her smiling eyes are narrow: their middle is kept at nearly full strength, the rim blends (the feather)
    assert eyes[core].mean() > 0.8 and eyes[core].max() > 0.93 and area[core].mean() > 0.99
    assert eyes[lids].mean() < 0.1 and area[lids].mean() > 0.7
    assert eyes[~_ring(shape, lm, 8)].max() < 0.01  # nothing beyond the eyes
    # a closed eye (upper lid on the lower): nothing of it kept
    closed = lm.copy()
    upper = [159, 158, 157, 160, 161, 386, 385, 384, 387, 388]
    lower = [145, 153, 154, 144, 163, 374, 380, 381, 373, 390]
    closed[upper] = closed[lower]
    assert region_mask(shape, closed, ("eyes",), size)[core].max() < 0.3


def _fill(shape: tuple[int, int], points: np.ndarray, grow: int = 0) -> np.ndarray:
    m = np.zeros(shape, np.uint8)
    cv2.fillPoly(m, [np.round(points).astype(np.int32)], 255)
    if grow:
        return np.asarray(cv2.dilate(m, np.ones((2 * grow + 1,) * 2, np.uint8))) > 0
    return m > 0


def test_a_smiles_whole_opening_is_kept_and_its_feather_falls_on_the_lips(
    pipeline: Pipeline, astronaut: np.ndarray
) -> None:
    big = cv2.resize(astronaut, (1024, 1024), interpolation=cv2.INTER_CUBIC)
    lm = _mesh(pipeline, big)
    shape = big.shape[:2]
    size = float(max(np.ptp(lm[:, 0]), np.ptp(lm[:, 1])))
    mouth = region_mask(shape, lm, ("mouth",), size)
    inner = _fill(shape, lm[list(INNER_LIPS)])
    assert inner.sum() > 500  # she smiles with her teeth showing
    assert mouth[inner].min() > 0.97  # every pixel of the opening is the target's, at full strength
    # the teeth FaceMesh hides under its inner lips are kept too: the band just outside the inner ring
    assert mouth[_fill(shape, lm[list(INNER_LIPS)], 2) & ~inner].mean() > 0.8
    # the feather ends on the lips: their outer quarter stays mostly the source's, and nothing beyond them
    inner_lm, outer_lm = lm[list(INNER_LIPS)], lm[list(OUTER_LIPS)]
    outer_quarter = _fill(shape, outer_lm) & ~_fill(shape, inner_lm + 0.75 * (outer_lm - inner_lm))
    assert outer_quarter.sum() > 200 and mouth[outer_quarter].mean() < 0.3
    assert mouth[~_fill(shape, outer_lm, 2)].max() < 0.2


def test_box_limited_blur_draws_what_a_whole_mask_blur_drew(
    pipeline: Pipeline, astronaut: np.ndarray
) -> None:
    lm = _mesh(pipeline, astronaut)
    shape = astronaut.shape[:2]
    size = float(max(np.ptp(lm[:, 0]), np.ptp(lm[:, 1])))
    for region in ("mouth", "eyes", "eye_area"):
        filled = np.zeros(shape, np.uint8)
        polys = [np.round(r * 16).astype(np.int32) for r in region_rings(lm, region)]
        cv2.fillPoly(filled, polys, 255, lineType=cv2.LINE_8, shift=4)
        grow = region_grow(lm, region, size)
        k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * abs(grow) + 1,) * 2)
        grown = np.asarray(
            cv2.dilate(filled, k) if grow > 0 else cv2.erode(filled, k) if grow < 0 else filled
        )
        whole = cv2.GaussianBlur(grown.astype(np.float32) / 255.0, (0, 0), max(0.5, size * FEATHER[region]))
        assert np.abs(region_mask(shape, lm, (region,), size) - whole).max() < 0.01, region


def _opened(lm: np.ndarray, opening: float) -> np.ndarray:
    """The mesh with its lower inner lip's middle moved so the mouth opens by `opening` of its width."""
    out = lm.copy()
    down = (lm[14] - lm[13]) / max(float(np.linalg.norm(lm[14] - lm[13])), 1e-9)
    width = float(np.linalg.norm(lm[308] - lm[78]))
    for lower, upper in ((14, 13), (87, 82), (317, 312)):
        out[lower] = lm[upper] + down * opening * width
    return out


def test_a_closed_mouth_grows_less_than_a_smile(pipeline: Pipeline, astronaut: np.ndarray) -> None:
    # the mouth's grow would hand the target's lips (identity) back; it is kept whole only once the mouth
    # shows its teeth, and it grows with the opening in between
    lm = _mesh(pipeline, astronaut)
    size = float(max(np.ptp(lm[:, 0]), np.ptp(lm[:, 1])))
    big = 4.0 * size  # a large face: grows of tens of px
    assert mouth_opening(lm) > MOUTH_OPEN[1]  # the astronaut smiles with her teeth
    full = int(round(big * GROW["mouth"]))
    assert region_grow(lm, "mouth", big) == full
    closed = _opened(lm, 0.0)
    assert mouth_opening(closed) < 1e-6
    assert region_grow(closed, "mouth", big) == int(round(big * GROW["mouth"] * MOUTH_CLOSED_GROW))
    grows = [region_grow(_opened(lm, o), "mouth", big) for o in np.linspace(0.0, 0.2, 9)]
    assert grows == sorted(grows) and grows[0] < grows[-1] == full
    # the eyes' grow does not follow the mouth
    assert region_grow(closed, "eyes", big) == region_grow(lm, "eyes", big) == int(round(big * GROW["eyes"]))
    # a talking mouth keeps less of the lips around its opening than the full grow would
    talking = _opened(lm, 0.06)
    shape = astronaut.shape[:2]
    kept = region_mask(shape, talking, ("mouth",), size) > 0.5
    ring = np.zeros(shape, np.uint8)
    cv2.fillPoly(ring, [np.round(talking[list(INNER_LIPS)] * 16).astype(np.int32)], 255, shift=4)
    grow = int(round(size * GROW["mouth"]))
    whole = cv2.dilate(ring, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1,) * 2)) > 0
    assert ring.any() and (ring > 0).sum() < kept.sum() < 0.9 * whole.sum()
