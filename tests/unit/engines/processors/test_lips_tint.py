"""The kept mouth in the source's lip colour (engines.processors.lips_tint) on a real mesh: the kept lips move
to the source's lip colour while the opening (teeth, tongue) and any kept skin past the lips keep the
target's pixels exactly, nothing outside the lips' box changes, and the torch twin (CPU torch here) gives the
same patch."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engines.frames import SourceFace
from engines.processors.lips_tint import fill, lips_box, tint_weights, wear
from engines.processors.masks import INNER_LIPS, OUTER_LIPS, region_mask

REDDER = np.array([30.0, -12.0, -8.0], np.float32)  # the source's lips against the target's


@pytest.fixture(scope="module")
def case(astronaut: np.ndarray, source: SourceFace) -> dict[str, object]:
    """The astronaut as the target; the 'relit source face' is the target itself with redder lips (its lip
    ring shifted by REDDER), pasted everywhere but the kept mouth and eyes."""
    lm = source.prepared.face.landmarks
    assert lm is not None
    local = np.asarray(lm, dtype=np.float64)
    roi = np.ascontiguousarray(astronaut)
    h, w = roi.shape[:2]
    size = float(max(np.ptp(local[:, 0]), np.ptp(local[:, 1])))
    ring = np.maximum(fill(h, w, local[list(OUTER_LIPS)]) - fill(h, w, local[list(INNER_LIPS)]), 0.0)
    image = roi.astype(np.float32) + ring[:, :, None] * REDDER
    mask = 1.0 - region_mask((h, w), local, ("mouth", "eyes"), size)
    return {"local": local, "roi": roi, "image": image, "mask": mask, "size": size}


def test_the_kept_lips_take_the_source_colour_and_the_opening_stays(case: dict[str, object]) -> None:
    local, roi, image, mask, size = (case[k] for k in ("local", "roi", "image", "mask", "size"))
    assert isinstance(local, np.ndarray) and isinstance(roi, np.ndarray) and isinstance(size, float)
    assert isinstance(image, np.ndarray) and isinstance(mask, np.ndarray)
    out_image, out_mask = wear(image, roi, mask, local, size)
    box = lips_box(local, size, roi.shape[:2])
    assert box is not None
    x0, y0, x1, y1 = box
    # outside the lips' box: the patch as it was
    outside = np.ones(mask.shape, bool)
    outside[y0:y1, x0:x1] = False
    assert np.array_equal(out_mask[outside], mask[outside])
    assert np.array_equal(out_image[outside], image[outside])
    # inside it the patch is the finished blend
    assert (out_mask[y0:y1, x0:x1] == 1.0).all()
    ring, weight = tint_weights(local, size, box)
    kept = 1.0 - mask[y0:y1, x0:x1]
    target = roi[y0:y1, x0:x1].astype(np.float32)
    moved = out_image[y0:y1, x0:x1] - target
    # the kept lips (the ring where the target is kept and the tint is full) moved most of the way
    lips = (ring > 0) & (kept > 0.9) & (weight > 0.9)
    assert lips.sum() > 50
    got = moved[lips].mean(0)
    assert np.abs(got - REDDER).max() < 0.3 * np.abs(REDDER).max(), got
    # the opening, away from its edge: the target's pixels exactly
    h, w = ring.shape
    pts = local - (x0, y0)
    opening = cv2.erode(fill(h, w, pts[list(INNER_LIPS)]), np.ones((5, 5), np.uint8)) > 0
    assert opening.sum() > 20
    assert np.abs(moved[opening]).max() < 0.5


def test_the_torch_twin_wears_the_same_lips(case: dict[str, object]) -> None:
    torch = pytest.importorskip("torch")
    from engines.processors import tensor_ops as T
    from engines.processors.device_mesh_warp import wear_lips

    local, roi, image, mask, size = (case[k] for k in ("local", "roi", "image", "mask", "size"))
    assert isinstance(local, np.ndarray) and isinstance(roi, np.ndarray) and isinstance(size, float)
    assert isinstance(image, np.ndarray) and isinstance(mask, np.ndarray)
    want_image, want_mask = wear(image, roi, mask, local, size)
    got_image, got_mask = wear_lips(
        torch.from_numpy(image.copy()),
        torch.from_numpy(roi.copy()),
        torch.from_numpy(mask.copy()),
        local,
        size,
    )
    assert np.array_equal(got_mask.numpy(), want_mask)
    # the same lips, opening and shift (one fill rule, one blur); the kept mouth's own mask is drawn by
    # tensor_ops.region_mask, which differs from masks.region_mask on edge pixels (by up to 0.75): the patches
    # agree where the two kept masks do, and elsewhere by no more than that difference moves the shift
    box = lips_box(local, size, roi.shape[:2])
    assert box is not None
    x0, y0, x1, y1 = box
    h, w = y1 - y0, x1 - x0
    pts = local - (x0, y0)
    kept_gap = np.abs(
        region_mask((h, w), pts, ("mouth",), size) - T.region_mask(h, w, pts, ("mouth",), size, "cpu").numpy()
    )
    diff = np.abs(got_image.numpy() - want_image).max(2)
    inside = diff[y0:y1, x0:x1]
    same = kept_gap < 1e-4
    assert same.mean() > 0.8 and inside[same].max() < 0.01, inside[same].max()
    assert (inside <= kept_gap * 1.01 * np.abs(REDDER).max() + 0.01).all()
    outside = np.ones(diff.shape, bool)
    outside[y0:y1, x0:x1] = False
    assert diff[outside].max() == 0.0


def test_kept_skin_past_thin_lips_stays_the_targets(case: dict[str, object]) -> None:
    local, roi, image, size = (case[k] for k in ("local", "roi", "image", "size"))
    assert isinstance(local, np.ndarray) and isinstance(roi, np.ndarray) and isinstance(size, float)
    assert isinstance(image, np.ndarray)
    thin = local.copy()  # the pasted face's lips a tenth as full: the kept mouth reaches past them
    inner, outer = list(INNER_LIPS), list(OUTER_LIPS)
    thin[outer] = thin[inner] + (thin[outer] - thin[inner]) / 10.0
    h, w = roi.shape[:2]
    mask = 1.0 - region_mask((h, w), thin, ("mouth",), size)
    out_image, _ = wear(image, roi, mask, thin, size)
    lips = cv2.dilate(fill(h, w, thin[outer]), np.ones((5, 5), np.uint8)) > 0
    beyond = ~lips & (mask < 0.8)
    assert beyond.sum() > 10
    plain = mask[:, :, None] * image + (1.0 - mask[:, :, None]) * roi  # the blend with the target as it is
    assert np.abs(out_image[beyond] - plain[beyond]).max() < 1.0
