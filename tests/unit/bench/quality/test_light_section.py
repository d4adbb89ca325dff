"""The light section's seam by side: each band pixel's angle about the face's centre (image axes, y down)
falls in one quarter, the top holding the forehead's edge and the bottom the jaw's."""

from __future__ import annotations

import numpy as np

from bench.quality.light_section import SIDES, side_of


def test_each_angle_falls_in_its_quarter_of_the_outline() -> None:
    angles = np.array([-90, -46, -44, 0, 44, 46, 90, 134, 136, 180, -180, -134, -136], dtype=np.float64)
    expected = ["top", "top", "right", "right", "right", "bottom", "bottom", "bottom"]
    expected += ["left", "left", "left", "top", "left"]
    assert [SIDES[k] for k in side_of(angles)] == expected


def test_a_ring_around_the_centre_splits_into_four_equal_quarters() -> None:
    angles = np.degrees(np.arctan2(*np.meshgrid(np.arange(-50, 50) + 0.5, np.arange(-50, 50) + 0.5)[::-1]))
    counts = np.bincount(side_of(angles.ravel()), minlength=len(SIDES))
    assert counts.tolist() == [2500] * 4
