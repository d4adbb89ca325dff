"""The kept mouth in the source's lip colour (engines.processors.lips_tint) on a real mesh: the kept lips move
to the source's lip colour while the opening (teeth, tongue) and any kept skin past the lips keep the
target's pixels exactly, nothing outside the lips' box changes, and the torch twin (CPU torch here) gives the
same patch."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engines.frames import SourceFace
from engines.processors.lips_tint import fill, lips_box, lips_fills, tint_weight, wear
from engines.processors.masks import INNER_LIPS, OUTER_LIPS, region_mask

REDDER = np.array([30.0, -12.0, -8.0], np.float32)  # the source's lips against the target's


class Case:
    """The astronaut as the target; the 'relit source face' is the target itself with redder lips (its lip
    ring shifted by REDDER), pasted everywhere but the kept mouth and eyes (or a mesh given)."""

    def __init__(self, astronaut: np.ndarray, landmarks: np.ndarray) -> None:
        self.local = np.asarray(landmarks, dtype=np.float64)
        self.roi = np.ascontiguousarray(astronaut)
        h, w = self.roi.shape[:2]
        self.size = float(max(np.ptp(self.local[:, 0]), np.ptp(self.local[:, 1])))
        ring = np.maximum(
            fill(h, w, self.local[list(OUTER_LIPS)]) - fill(h, w, self.local[list(INNER_LIPS)]), 0
        )
        self.image = self.roi.astype(np.float32) + ring[:, :, None] * REDDER
        self.kept = region_mask((h, w), self.local, ("mouth", "eyes"), self.size)
        self.mask = 1.0 - self.kept

    def worn(self) -> tuple[np.ndarray, np.ndarray]:
        image, mask = self.image.copy(), self.mask.copy()
        wear(image, self.roi, mask, self.kept, self.local, self.size)
        return image, mask


@pytest.fixture(scope="module")
def case(astronaut: np.ndarray, source: SourceFace) -> Case:
    lm = source.prepared.face.landmarks
    assert lm is not None
    return Case(astronaut, lm)


def test_the_kept_lips_take_the_source_colour_and_the_opening_stays(case: Case) -> None:
    out_image, out_mask = case.worn()
    box = lips_box(case.local, case.size, case.roi.shape[:2])
    assert box is not None
    x0, y0, x1, y1 = box
    # outside the lips' box: the patch as it was
    outside = np.ones(case.mask.shape, bool)
    outside[y0:y1, x0:x1] = False
    assert np.array_equal(out_mask[outside], case.mask[outside])
    assert np.array_equal(out_image[outside], case.image[outside])
    # inside it the patch is the finished blend
    assert (out_mask[y0:y1, x0:x1] == 1.0).all()
    outer, opening = lips_fills(case.local, box)
    ring = np.maximum(outer - opening, 0.0)
    weight = tint_weight(outer, opening, case.kept[y0:y1, x0:x1], case.size)
    kept = case.kept[y0:y1, x0:x1]
    moved = out_image[y0:y1, x0:x1] - case.roi[y0:y1, x0:x1].astype(np.float32)
    # the kept lips (the ring where the target is kept and the tint is full) moved most of the way
    lips = (ring > 0) & (kept > 0.9) & (weight > 0.9)
    assert lips.sum() > 50
    got = moved[lips].mean(0)
    assert np.abs(got - REDDER).max() < 0.3 * np.abs(REDDER).max(), got
    # the opening, away from its edge: the target's pixels exactly
    inside = cv2.erode(opening, np.ones((5, 5), np.uint8)) > 0
    assert inside.sum() > 20
    assert np.abs(moved[inside]).max() < 0.5


def test_kept_skin_past_thin_lips_stays_the_targets(astronaut: np.ndarray, case: Case) -> None:
    thin = case.local.copy()  # the pasted face's lips a tenth as full: the kept mouth reaches past them
    inner, outer = list(INNER_LIPS), list(OUTER_LIPS)
    thin[outer] = thin[inner] + (thin[outer] - thin[inner]) / 10.0
    other = Case(astronaut, thin)
    other.image = case.image  # the same redder face
    out_image, _ = other.worn()
    h, w = case.roi.shape[:2]
    lips = cv2.dilate(fill(h, w, thin[outer]), np.ones((5, 5), np.uint8)) > 0
    beyond = ~lips & (other.mask < 0.8)
    assert beyond.sum() > 10
    m = other.mask[:, :, None]
    plain = m * other.image + (1.0 - m) * case.roi  # the blend with the target as it is
    assert np.abs(out_image[beyond] - plain[beyond]).max() < 1.0


def test_the_torch_twin_wears_the_same_lips(case: Case) -> None:
    torch = pytest.importorskip("torch")
    from engines.processors.device_mesh_warp import wear_lips

    want_image, want_mask = case.worn()
    got_image, got_mask = torch.from_numpy(case.image.copy()), torch.from_numpy(case.mask.copy())
    wear_lips(
        got_image, torch.from_numpy(case.roi), got_mask, torch.from_numpy(case.kept), case.local, case.size
    )
    assert np.array_equal(got_mask.numpy(), want_mask)
    diff = np.abs(got_image.numpy() - want_image)
    assert diff.max() < 0.01, diff.max()  # the same fills, blurs and kept map: float rounding only
