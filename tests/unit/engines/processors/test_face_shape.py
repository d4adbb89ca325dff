"""The shape transfer's pure geometry (engines.processors.face_shape, source_validity) on a real mesh: the
fit removes pose and keeps shape, the cap holds, the target's expression is put back, folds are refused, the
warp stays inside its window, and the validity map keeps skin and features and drops hair and background."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engines.frames import SourceFace
from engines.processors.face_shape import (
    EYE_CORNERS,
    EYE_RINGS,
    MIN_DET,
    cap,
    face_size,
    fitted,
    mouth_gap,
    pixel_maps,
    plan_warp,
    pose,
    restore_expression,
    shape_offset,
    smooth,
    smoothed,
    spline_frame,
    triangle_depths,
    window_spline,
)
from engines.source.mesh import MeshSource
from engines.source.validity import FACE_OVAL, fill_outside, validity_map


@pytest.fixture(scope="module")
def mesh(source: SourceFace) -> MeshSource:
    m = source.prepared.mesh
    assert isinstance(m, MeshSource) and m.shape is not None
    return m


@pytest.fixture(scope="module")
def target(source: SourceFace) -> np.ndarray:
    lm = source.prepared.face.landmarks
    assert lm is not None
    return np.asarray(lm, dtype=np.float64)


def _posed(mesh: MeshSource, yaw_deg: float, scale: float, shift: tuple[float, float]) -> np.ndarray:
    assert mesh.shape is not None
    a = np.deg2rad(yaw_deg)
    rot = np.array([[np.cos(a), 0.0, np.sin(a)], [0.0, 1.0, 0.0], [-np.sin(a), 0.0, np.cos(a)]])
    return np.asarray(scale * (mesh.shape.points @ rot.T)[:, :2] + np.asarray(shift))


def test_pose_alone_is_not_a_shape(mesh: MeshSource) -> None:
    """The source's own mesh, turned, scaled and moved, is fitted back exactly: no offset."""
    assert mesh.shape is not None
    for yaw, scale in ((0.0, 1.0), (20.0, 0.6), (-15.0, 1.4)):
        target = _posed(mesh, yaw, scale, (320.0, 180.0))
        err = np.abs(fitted(mesh.shape, target) - target).max()
        assert err < 1e-6 * face_size(target) + 1e-6, (yaw, err)
        assert np.abs(shape_offset(mesh.shape, target)).max() < 1e-3


def test_pose_is_the_nearest_scaled_rotation(mesh: MeshSource, target: np.ndarray) -> None:
    """The closed-form pose equals the SVD's: scale = the fit's mean singular value, rows = U V', on the
    source's own mesh and on it bent, sheared and squeezed (a fit with singular values far apart)."""
    assert mesh.shape is not None
    rng = np.random.default_rng(7)
    for i in range(40):
        bend = np.eye(2) + (rng.normal(0.0, 0.3, (2, 2)) if i else 0.0)
        points = (target - target.mean(0)) @ bend.T * rng.uniform(0.2, 3.0) + rng.uniform(0, 600, 2)
        rigid = points[mesh.shape.rigid]
        u, s, vt = np.linalg.svd((rigid - rigid.mean(0)).T @ mesh.shape.fit, full_matrices=False)
        scale, rows, centre = pose(mesh.shape, points)
        assert abs(scale - s.mean()) <= 1e-9 * s.mean()
        assert np.abs(rows - u @ vt).max() < 1e-9
        assert np.abs(rows @ rows.T - np.eye(2)).max() < 1e-9
        assert np.allclose(centre, rigid.mean(0))


def test_triangle_depths_follow_the_targets_pose(mesh: MeshSource) -> None:
    """Each triangle's depth is its distance along the view axis in the target's pose, nose nearer."""
    assert mesh.shape is not None
    for yaw in (0.0, 35.0, -50.0):
        a = np.deg2rad(yaw)
        rot = np.array([[np.cos(a), 0.0, np.sin(a)], [0.0, 1.0, 0.0], [-np.sin(a), 0.0, np.cos(a)]])
        target = _posed(mesh, yaw, 0.8, (320.0, 180.0))
        depth = triangle_depths(mesh.shape, target, mesh.triangles)
        z = (mesh.shape.points @ rot.T)[:, 2][mesh.triangles].mean(1)
        # the posed mesh's own z, in whichever sign puts the nose tip nearer than the face's rigid points
        nose = np.isin(mesh.triangles, [1]).any(1)
        want = z if z[nose].mean() < z.mean() else -z
        assert np.abs(depth - want).max() < 1e-6 * np.ptp(z), yaw
        assert depth[nose].mean() < np.median(depth)


def test_another_shape_gives_an_offset_within_the_cap(mesh: MeshSource) -> None:
    target = _posed(mesh, 10.0, 1.0, (300.0, 200.0))
    target[:, 0] = 300.0 + (target[:, 0] - 300.0) * 1.3  # a wider face than the source's
    offset = shape_offset(mesh.shape, target)  # type: ignore[arg-type]
    lengths = np.linalg.norm(offset, axis=1)
    assert lengths.max() > 0.02 * face_size(target)  # the source's narrower face shows
    assert lengths.max() <= 0.06 * face_size(target) * 1.5  # capped (the mouth's restore may add a little)
    # the offset pulls the sides in: the new face is narrower than the target
    new = target + offset
    assert np.ptp(new[:, 0]) < np.ptp(target[:, 0])


def test_the_outline_is_smoothed_more_than_the_inside(mesh: MeshSource) -> None:
    # the nose, lips and eyes keep their own shape (one pass); the silhouette, where the paste meets the
    # target's skin, moves smoothly (three passes), fading between over the ring's neighbours
    shape = mesh.shape
    assert shape is not None
    ring = np.zeros(len(shape.points), bool)
    ring[list(FACE_OVAL)] = True
    w = shape.outline[:, 0]
    assert np.all(w[ring] == 1.0)
    near = (w > 0) & ~ring
    assert near.sum() >= len(FACE_OVAL) and np.all(w[near] < 1.0)
    offset = np.random.default_rng(1).normal(0.0, 3.0, (468, 2))
    out, once, thrice = smoothed(offset, shape), smooth(offset, shape, 1), smooth(offset, shape, 3)
    inside = w == 0
    assert inside.sum() > 300
    assert np.allclose(out[inside], once[inside]) and np.allclose(out[ring], thrice[ring])
    # more passes, less roughness: the ring's points differ less from their ring neighbours than inside
    rough = np.linalg.norm(out - smooth(out, shape, 1, 1.0), axis=1)
    assert rough[ring].mean() < 0.6 * rough[inside].mean()


def test_cap_shortens_long_offsets_only() -> None:
    rng = np.random.default_rng(0)
    offset = rng.normal(0, 5, (468, 2))
    out = cap(offset, 4.0)
    lengths, before = np.linalg.norm(out, axis=1), np.linalg.norm(offset, axis=1)
    assert lengths.max() <= 4.0 + 1e-9
    short = before <= 4.0
    assert np.array_equal(out[short], offset[short])
    cos = (out[~short] * offset[~short]).sum(1) / (lengths[~short] * before[~short])
    assert np.allclose(cos, 1.0)


def test_the_targets_mouth_opening_and_lid_profile_are_put_back(target: np.ndarray) -> None:
    rng = np.random.default_rng(1)
    offset = rng.normal(0, 2.0, (468, 2))
    offset[[14, 87, 317]] += (0.0, 6.0)  # this offset would open the mouth by 6 px
    down = np.array([0.0, 1.0])
    restored = restore_expression(offset, target)
    gap = mouth_gap(target, down)
    assert abs(mouth_gap(target + offset, down) - gap) > 3.0
    assert mouth_gap(target + restored, down) == pytest.approx(gap, abs=0.05)
    for ring, (ca, cb) in zip(EYE_RINGS, EYE_CORNERS, strict=True):
        # the eye moves as one to the source's eye centre; its outline, width and opening stay the target's
        shift = restored[list(ring)]
        assert np.allclose(shift, (offset[ca] + offset[cb]) / 2.0, atol=1e-9)
        assert np.abs(offset[list(ring)] - shift).max() > 1.0  # (the offset alone would have reshaped it)
        moved = target[list(ring)] + shift
        assert np.allclose(moved - moved.mean(0), target[list(ring)] - target[list(ring)].mean(0))


def test_a_small_offset_warps_at_full_strength_inside_its_window(
    target: np.ndarray, mesh: MeshSource
) -> None:
    offset = shape_offset(mesh.shape, _widened(target))  # type: ignore[arg-type]
    plan = plan_warp((512, 512), target, offset, 1.0)
    assert plan is not None and plan.alpha == 1.0 and plan.refused == 0 and plan.min_det >= MIN_DET
    assert np.allclose(plan.landmarks, target + offset, atol=1e-3)
    map_x, map_y = pixel_maps(plan)
    x0, y0, x1, y1 = plan.window
    xs, ys = np.meshgrid(np.arange(x0, x1), np.arange(y0, y1))
    dx, dy = map_x - xs, map_y - ys
    assert np.abs(dx).max() > 1.0  # something moves
    rim = np.ones_like(dx, bool)
    rim[2:-2, 2:-2] = False
    assert np.hypot(dx, dy)[rim].max() < 0.5  # ...but not at the window's edge
    # the new mesh's control points sample the target's old ones (the target's pixels follow the mesh)
    for i in (152, 234, 454, 10, 61):
        px, py = plan.landmarks[i] - (x0, y0)
        at_x, at_y = np.full((1, 1), px, np.float32), np.full((1, 1), py, np.float32)
        got = (
            cv2.remap(map_x, at_x, at_y, cv2.INTER_LINEAR)[0, 0],
            cv2.remap(map_y, at_x, at_y, cv2.INTER_LINEAR)[0, 0],
        )
        assert np.hypot(got[0] - target[i, 0], got[1] - target[i, 1]) < 0.6, i
    # no fold anywhere in the pixel map
    jx, jy = np.gradient(map_x, axis=1), np.gradient(map_y, axis=0)
    kx, ky = np.gradient(map_x, axis=0), np.gradient(map_y, axis=1)
    assert (jx * jy - kx * ky).min() > 0


def test_the_window_spline_passes_through_its_points_and_rests_on_the_border() -> None:
    """Moving points placed on inner nodes: the spline there is their value (up to its small smoothing),
    next to the border it is far smaller, and with no values nothing moves."""
    frame = spline_frame()
    rng = np.random.default_rng(3)
    inner = frame.nodes
    centre = np.abs(inner - 0.5).max(1) < 0.3
    picked = rng.choice(np.nonzero(centre)[0], 12, replace=False)
    values = rng.normal(0.0, 3.0, (12, 2))
    out = window_spline(inner[picked], values, frame)
    assert out.shape == (len(inner), 2)
    assert np.abs(out[picked] - values).max() < 0.05 * np.abs(values).max()
    edge = np.abs(inner - 0.5).max(1) > 0.4  # the ring of nodes next to the border
    assert np.abs(out[edge]).max() < 0.5 * np.abs(values).max()
    # no moving point, nothing moves
    assert np.allclose(window_spline(inner[picked], np.zeros((12, 2)), frame), 0.0)


def _widened(target: np.ndarray) -> np.ndarray:
    out = target.copy()
    c = out[:, 0].mean()
    out[:, 0] = c + (out[:, 0] - c) * 1.15
    return out


def test_folds_are_refused(target: np.ndarray) -> None:
    """An offset that throws the jaw's left half across the face would fold the map: alpha is scaled back
    until it does not (or the face is not warped at all), never a folded map."""
    offset = np.zeros((468, 2))
    left = target[:, 0] < np.median(target[:, 0])
    offset[left, 0] = 0.7 * face_size(target)
    plan = plan_warp((512, 512), target, offset, 1.0)
    assert plan is None or (plan.refused >= 1 and plan.alpha < 1.0 and plan.min_det >= MIN_DET)
    assert plan_warp((512, 512), target, offset, 0.0) is None  # shape 0: no warp at all


def test_validity_keeps_skin_and_features_and_drops_hair_and_background(
    astronaut: np.ndarray, target: np.ndarray
) -> None:
    valid = validity_map(astronaut, target)
    assert valid.shape == astronaut.shape[:2] and valid.dtype == np.uint8

    def at(i: int) -> int:
        x, y = np.round(target[i]).astype(int)
        return int(valid[y, x])

    assert min(at(1), at(205), at(425)) >= 250  # nose tip, cheeks
    assert min(at(159), at(13), at(105)) >= 224  # an eye, the lips, a brow (feathered near its edge)
    assert valid[5, 5] == 0 and valid[-5, -5] == 0  # background
    top = target[10]  # above the forehead's top: hair
    assert valid[int(top[1] - 0.1 * face_size(target)), int(top[0])] == 0
    # a non-skin blob painted on a cheek is not pasted (one smaller than the closing, a freckle, would be)
    painted = astronaut.copy()
    cx, cy = np.round(target[205]).astype(int)
    r = max(3, int(0.08 * face_size(target)))
    cv2.circle(painted, (int(cx), int(cy)), r, (30, 200, 40), -1)
    assert validity_map(painted, target)[cy, cx] < 64


def test_strands_of_hair_across_a_cheek_are_not_filled_in(astronaut: np.ndarray, target: np.ndarray) -> None:
    """Thin skin-coloured strands (darker lines a few pixels apart, as hair falling along a cheek) are told
    by their detail: the closing that fills a freckle or a shadow must not fill them back in."""
    painted = astronaut.copy()
    cx, cy = np.round(target[205]).astype(int)
    half = max(4, int(0.05 * face_size(target)))
    skin = astronaut[cy - 2 : cy + 3, cx - 2 : cx + 3].reshape(-1, 3).mean(0)
    strand = tuple(int(v) for v in np.clip(skin * 0.8, 0, 255))
    for x in range(cx - half, cx + half + 1, 3):
        cv2.line(painted, (x, cy - half), (x + 2, cy + half), strand, 1)
    assert validity_map(astronaut, target)[cy, cx] >= 250  # the bare cheek is pasted
    assert validity_map(painted, target)[cy, cx] < 128


def test_the_feathered_edge_fades_into_the_sources_skin_not_into_what_was_refused() -> None:
    skin, hair = (200, 150, 120), (60, 30, 20)
    image = np.zeros((120, 120, 3), np.uint8)
    image[:] = hair
    inside = np.zeros((120, 120), np.uint8)
    cv2.circle(inside, (60, 60), 35, 255, -1)
    image[inside > 0] = skin
    validity = cv2.GaussianBlur(inside, (0, 0), 4.0)
    out = fill_outside(image, validity)
    ring = (validity > 0) & (validity < 128)
    assert ring.any()
    assert np.abs(out[ring].astype(int) - skin).max() <= 12  # the refused pixels the edge shows: skin-like
    assert (out[validity >= 128] == image[validity >= 128]).all()  # valid pixels untouched
    assert (out[validity == 0] == image[validity == 0]).all()  # never pasted: left as they were
