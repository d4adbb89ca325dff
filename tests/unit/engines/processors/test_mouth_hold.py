"""The face-shape warp held over the mouth (engines.processors.mouth_hold) on a real mesh: the held opening
moves as one piece (every fully held pixel samples the target at itself + the inner lips' shift, which carries
the new mesh's inner lips exactly onto the target's), nothing outside the mouth's box changes, the held map
does not fold, and the torch twin (CPU torch here) draws the same weight (within 1e-4: the
same fill rule, grow and blur) and holds the map the same way."""

from __future__ import annotations

import numpy as np
import pytest

from engines.frames import SourceFace
from engines.processors.face_shape import MIN_DET, WarpPlan, pixel_map, plan_warp, shape_offset
from engines.processors.masks import INNER_LIPS
from engines.processors.mouth_hold import (
    device_weight,
    held_pixel_map,
    hold_offsets,
    hold_shape,
    plan_hold,
)
from engines.source.mesh import MeshSource


@pytest.fixture(scope="module")
def target(source: SourceFace) -> np.ndarray:
    """The astronaut's own mesh, 15 % wider: a face shape the source's differs from."""
    lm = source.prepared.face.landmarks
    assert lm is not None
    t = np.asarray(lm, dtype=np.float64)
    centre = t.mean(0)
    t[:, 0] = centre[0] + (t[:, 0] - centre[0]) * 1.15
    return t


@pytest.fixture(scope="module")
def plan(source: SourceFace, target: np.ndarray) -> WarpPlan:
    mesh = source.prepared.mesh
    assert isinstance(mesh, MeshSource) and mesh.shape is not None
    p = plan_warp((512, 512), target, shape_offset(mesh.shape, target), 1.0)
    assert p is not None
    return p


def _identity(h: int, w: int, origin: tuple[int, int]) -> np.ndarray:
    xs, ys = np.meshgrid(
        np.arange(w, dtype=np.float64) + origin[0], np.arange(h, dtype=np.float64) + origin[1]
    )
    return np.dstack([xs, ys])


def test_the_held_opening_moves_as_one(plan: WarpPlan, target: np.ndarray) -> None:
    hold = plan_hold(plan, target)
    assert hold is not None
    inner = list(INNER_LIPS)
    # the inner lips all move by one shift: it carries the new mesh's opening onto the target's exactly
    assert np.abs(plan.landmarks[inner] + hold.shift - target[inner]).max() < 1e-3
    x0, y0, x1, y1 = plan.window
    base, held = pixel_map(plan), held_pixel_map(plan, target)
    offsets = held - _identity(y1 - y0, x1 - x0, (x0, y0))
    bx0, by0, bx1, by1 = hold.box
    full = hold.weight > 0.999
    assert full.sum() > 200  # the whole opening, not a few pixels
    box = offsets[by0:by1, bx0:bx1]
    assert np.abs(box[full] - hold.shift).max() < 1e-3  # uniform where fully held
    # before, the spline bent the opening: the shift differed from the map there by pixels
    base_box = (base - _identity(y1 - y0, x1 - x0, (x0, y0)))[by0:by1, bx0:bx1]
    assert np.abs(base_box[full] - hold.shift).max() > 0.25
    outside = np.ones(base.shape[:2], bool)
    outside[by0:by1, bx0:bx1] = False
    assert (held[outside] == base[outside]).all()
    # the feather over the lips does not fold the map
    dx, dy = np.diff(held, axis=1)[:-1], np.diff(held, axis=0)[:, :-1]
    assert (dx[..., 0] * dy[..., 1] - dx[..., 1] * dy[..., 0]).min() > MIN_DET


def test_the_torch_twin_holds_the_same_map(plan: WarpPlan, target: np.ndarray) -> None:
    torch = pytest.importorskip("torch")
    cpu = torch.device("cpu")
    hold = plan_hold(plan, target)
    shape = hold_shape(plan, target)
    assert hold is not None and shape is not None and shape.box == hold.box
    weight = device_weight(shape, cpu)
    assert np.abs(weight.numpy() - hold.weight).max() < 1e-4
    x0, y0, x1, y1 = plan.window
    h, w = y1 - y0, x1 - x0
    grid = torch.from_numpy(plan.grid).permute(2, 0, 1)[None]
    offsets = torch.nn.functional.interpolate(grid, size=(h, w), mode="bilinear", align_corners=True)[0]
    # the two stretch the coarse grid to pixels a little apart (OpenCV's fixed-point interpolation): the
    # hold adds nothing to that
    apart = np.abs(offsets.permute(1, 2, 0).numpy() - (pixel_map(plan) - _identity(h, w, (x0, y0)))).max()
    assert apart < 0.1
    hold_offsets(offsets, shape, weight)
    want = held_pixel_map(plan, target) - _identity(h, w, (x0, y0))
    err = np.abs(offsets.permute(1, 2, 0).numpy() - want).max()
    assert err < apart + 1e-3, (err, apart)
