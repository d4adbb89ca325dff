"""The paste's edge widens where the pasted face and the target differ in colour, and keeps its narrow
feather where they agree; the device twin draws the same mask."""

from __future__ import annotations

import numpy as np
import pytest

from engines.processors.paste import SEAM_WIDEN, feathered_polygon_mask, seam_feather

HULL = np.array([[20.0, 15.0], [100.0, 18.0], [110.0, 90.0], [60.0, 115.0], [15.0, 85.0]])


def _masks() -> tuple[np.ndarray, np.ndarray]:
    narrow = feathered_polygon_mask(130, 125, HULL, erode=2, blur=3.0)
    wide = feathered_polygon_mask(130, 125, HULL, erode=int(2 * SEAM_WIDEN), blur=3.0 * SEAM_WIDEN)
    return narrow, wide  # the wide one as the seam draws it, at full resolution


def _pictures() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    roi = rng.integers(90, 160, (130, 125, 3)).astype(np.uint8)
    image = roi.astype(np.float32)
    image[:, 70:] += 60.0  # the face's right side a different colour from the target's skin there
    return image, roi


def test_the_feather_widens_only_where_the_colours_step() -> None:
    narrow, wide = _masks()
    image, roi = _pictures()
    same = seam_feather(narrow, HULL, 2, roi.astype(np.float32), roi, 3.0)
    assert np.abs(same - narrow).max() < 1e-6  # nothing steps: the narrow feather, as before
    mixed = seam_feather(narrow, HULL, 2, image, roi, 3.0)
    left, right = (slice(None), slice(None, 55)), (slice(None), slice(85, None))
    assert np.abs(mixed[left] - narrow[left]).max() < 1e-3
    # the wide feather is drawn on a coarser grid: it follows the full-resolution one within its pixels
    assert np.abs(mixed[right] - wide[right]).mean() < 0.05 and np.abs(mixed[right] - wide[right]).max() < 0.3
    assert np.abs(wide[right] - narrow[right]).max() > 0.3  # the two feathers do differ there


def test_the_device_twin_draws_the_same_mask() -> None:
    torch = pytest.importorskip("torch")
    from engines.processors.device_mesh_warp import seam_feather as device_seam_feather

    narrow, wide = _masks()
    image, roi = _pictures()
    want = seam_feather(narrow, HULL, 2, image, roi, 3.0)
    got = device_seam_feather(
        torch.from_numpy(narrow), HULL, 2, torch.from_numpy(image), torch.from_numpy(roi), 3.0
    ).numpy()
    # the two polygon fills differ on edge pixels of the coarse grid only
    assert np.abs(got - want).mean() < 0.01 and np.abs(got - want).max() < 0.35
