"""FaceMesh's left/right symmetry and a turned source's far half read from its near half
(engines.source.mirror, and mesh_warp's use of it) on real meshes."""

from __future__ import annotations

from dataclasses import replace

import cv2
import numpy as np
import pytest

from engines.frames import SourceFace
from engines.pipeline import Pipeline
from engines.processors.masks import EYE_LEFT, EYE_RIGHT, INNER_LIPS, OUTER_LIPS
from engines.processors.mesh_warp import MeshWarpSwapper, warp_maps
from engines.source.mesh import MeshSource, triangulate
from engines.source.mirror import (
    MIRROR,
    MIRROR_YAW,
    far_side,
    frontal_layout,
    midline_pulled,
    mirror_index,
    mirrored_reads,
    sides,
    symmetrised,
    yaw_degrees,
)
from engines.source.validity import BROW_LEFT, BROW_RIGHT, CHEEKS, FACE_OVAL, validity_map


@pytest.fixture(scope="module")
def points(source: SourceFace) -> np.ndarray:
    """The astronaut's 3-D mesh (468, 3): pixels and depth (a frontal face)."""
    lm = source.prepared.face.landmarks
    assert lm is not None and source.prepared.depth is not None
    return np.column_stack([lm, source.prepared.depth]).astype(np.float64)


def _turned(points: np.ndarray, yaw_deg: float) -> np.ndarray:
    """The mesh turned about its own vertical axis through its centre (image axes: x right, y down)."""
    a = np.deg2rad(yaw_deg)
    rot = np.array([[np.cos(a), 0.0, np.sin(a)], [0.0, 1.0, 0.0], [-np.sin(a), 0.0, np.cos(a)]])
    c = points.mean(0)
    return np.asarray((points - c) @ rot.T + c)


def test_mirror_is_an_involution_that_swaps_the_named_sides() -> None:
    m = mirror_index()
    assert len(MIRROR) == 468 and sorted(MIRROR) == list(range(468))
    assert np.array_equal(m[m], np.arange(468))
    assert int((m == np.arange(468)).sum()) == 28  # the midline
    for a, b in ((33, 263), (133, 362), (159, 386), (145, 374), (61, 291), (234, 454), (70, 300), (98, 327)):
        assert m[a] == b and m[b] == a
    for i in (1, 2, 4, 10, 13, 14, 152, 168, 0, 17):
        assert m[i] == i
    for right, left in ((EYE_RIGHT, EYE_LEFT), (BROW_RIGHT, BROW_LEFT), (CHEEKS[0], CHEEKS[1])):
        assert sorted(m[list(right)]) == sorted(left)
    # the lids' folds, in the same order on both eyes
    upper = ((247, 30, 29, 27, 28, 56, 190), (467, 260, 259, 257, 258, 286, 414))
    lower = ((226, 31, 228, 229, 230, 231, 232, 233, 244), (446, 261, 448, 449, 450, 451, 452, 453, 464))
    for fold_right, fold_left in (upper, lower):
        assert np.array_equal(m[list(fold_right)], fold_left)
    for ring in (FACE_OVAL, OUTER_LIPS, INNER_LIPS):
        assert sorted(m[list(ring)]) == sorted(ring)


def test_mirror_reflects_a_real_frontal_mesh(points: np.ndarray) -> None:
    """Each point, reflected across the face's midline, lands on its mirror point."""
    layout = frontal_layout(points)
    mid = float(np.median(layout[mirror_index() == np.arange(468), 0]))
    reflected = np.column_stack([2 * mid - layout[:, 0], layout[:, 1]])
    err = np.linalg.norm(reflected - layout[mirror_index()], axis=1) / np.ptp(layout[:, 1])
    assert err.max() < 0.04 and float(np.median(err)) < 0.01
    # a wrong table (each side's order shuffled once) does not
    wrong = mirror_index().copy()
    wrong[[33, 133]] = wrong[[133, 33]]
    assert (
        np.linalg.norm(reflected[[33, 133]] - layout[wrong[[33, 133]]], axis=1) / np.ptp(layout[:, 1])
    ).min() > 0.1


def test_the_frontal_layout_ignores_the_pose(points: np.ndarray) -> None:
    base = frontal_layout(points)
    for yaw in (-40.0, 25.0):
        assert np.abs(frontal_layout(_turned(points, yaw)) - base).max() < 1e-6 * np.ptp(base)
    assert yaw_degrees(points) < 5.0
    assert yaw_degrees(_turned(points, 35.0)) == pytest.approx(35.0 + yaw_degrees(points), abs=5.0)


def test_a_frontal_source_reads_its_own_triangles(source: SourceFace, points: np.ndarray) -> None:
    mesh = source.prepared.mesh
    assert isinstance(mesh, MeshSource) and mesh.shape is not None
    assert far_side(points) == 0 and mesh.reads is None and mesh.layout is None
    assert far_side(_turned(points, 0.6 * MIRROR_YAW)) == 0


@pytest.mark.parametrize("yaw", [40.0, -40.0])
def test_a_turned_source_reads_its_far_half_from_its_near_half(points: np.ndarray, yaw: float) -> None:
    turned = _turned(points, yaw)
    far = far_side(turned)
    assert far in (-1, 1)
    side = sides(turned)
    # the far half is the one the turn narrowed in the image
    width = {s: float(np.ptp(turned[side == s, 0])) for s in (-1, 1)}
    assert width[far] < 0.8 * width[-far]
    tris = triangulate(frontal_layout(turned).astype(np.float32)).astype(np.int64)
    reads = mirrored_reads(tris, side, far)
    changed = (reads != tris).any(1)
    assert changed.sum() > 0.3 * len(tris)
    # each far point reads at its mirror point, every other point at itself: one read position per point
    on = side[tris]
    assert np.array_equal(reads[on == far], mirror_index()[tris[on == far]])
    assert np.array_equal(reads[on != far], tris[on != far])
    assert (side[reads] != far).all()  # nothing is read on the far half
    assert np.array_equal(mirrored_reads(tris, side, 0), tris)


def test_a_turned_sources_far_half_reaches_the_target(
    pipeline: Pipeline, group_photo: np.ndarray, astronaut: np.ndarray, source: SourceFace
) -> None:
    """The group photo's second face from the left is turned about 30 degrees: without its far half read
    from its near half, the validity map keeps most of the target's face on that side the target's."""
    faces = sorted(pipeline.detect([group_photo])[0], key=lambda f: f.box[0])
    x1, y1, x2, y2 = faces[1].box.astype(int)
    p = (x2 - x1) // 2
    crop = np.ascontiguousarray(group_photo[max(y1 - p, 0) : y2 + p, max(x1 - p, 0) : x2 + p])
    turned = pipeline.prepare_source(crop, "turned").prepared.mesh
    assert isinstance(turned, MeshSource) and turned.reads is not None and turned.layout is not None
    changed = (turned.reads != turned.triangles).any(1)
    assert changed.any()
    target = source.prepared.face.landmarks
    assert target is not None
    far = np.unique(turned.triangles[changed])
    far_mask = np.zeros(astronaut.shape[:2], np.uint8)
    cv2.fillConvexPoly(far_mask, cv2.convexHull(target[far].astype(np.float32)).astype(np.int32), 1)
    swapper = MeshWarpSwapper()

    def reached(mesh: MeshSource) -> float:
        patch = swapper.face_patch(astronaut, target, mesh)
        assert patch is not None
        x0, y0 = -int(patch.matrix[0, 2]), -int(patch.matrix[1, 2])
        h, w = patch.mask.shape
        inside = far_mask[y0 : y0 + h, x0 : x0 + w] > 0
        return float((patch.mask[inside] > 0.5).mean())

    with_mirror, without = reached(turned), reached(replace(turned, reads=None))
    assert with_mirror > 0.6 and with_mirror > without + 0.2, (with_mirror, without)


def test_a_turned_sources_far_half_takes_its_near_halfs_shape(points: np.ndarray) -> None:
    turned = _turned(points, 40.0)
    far = far_side(turned)
    out = symmetrised(turned, far)
    side = sides(turned)
    assert np.array_equal(out[side == -far], turned[side == -far])  # the near half stays
    size = float(np.ptp(turned[:, 1]))
    assert (
        np.linalg.norm(out[side == 0] - turned[side == 0], axis=1).max() < 0.01 * size
    )  # the midline, nearly
    # the result is its own mirror image: each point's reflection lands on its mirror point
    layout = frontal_layout(out)
    mid = float(layout[side == 0, 0].mean())
    reflected = np.column_stack([2 * mid - layout[:, 0], layout[:, 1]])
    assert np.abs(reflected - layout[mirror_index()]).max() < 1e-6 * np.ptp(layout)
    # a near-symmetric face barely changes; frontal sources are not symmetrised at all
    assert np.linalg.norm(out - turned, axis=1).max() < 0.06 * size
    assert np.array_equal(symmetrised(points, 0), points)


def test_a_turned_sources_midline_is_read_toward_its_near_half(points: np.ndarray) -> None:
    turned = _turned(points, 40.0)
    far, side = far_side(turned), sides(turned)
    tris = triangulate(frontal_layout(turned).astype(np.float32)).astype(np.int64)
    read = turned[:, :2]
    pulled = midline_pulled(read, tris, side, far)
    assert np.array_equal(pulled[side != 0], read[side != 0])  # only the midline moves...
    moved = pulled[side == 0] - read[side == 0]
    assert (np.linalg.norm(moved, axis=1) > 0).mean() > 0.8
    # ...toward the near half, in the image: along the face's across direction, away from the far half
    toward_near = read[side == -far].mean(0) - read[side == far].mean(0)
    assert (moved @ toward_near > 0).mean() > 0.8
    assert np.array_equal(midline_pulled(read, tris, side, 0), read)


def test_a_turned_noses_ridge_is_outline(pipeline: Pipeline, group_photo: np.ndarray) -> None:
    """The group photo's standing man is turned far: his nose's ridge is his outline, with a light window
    past it that passes the nose's looser colour test; as outline, the ridge is pulled away from."""
    faces = sorted(pipeline.detect([group_photo])[0], key=lambda f: f.box[0])
    x1, y1, x2, y2 = faces[4].box.astype(int)
    p = (x2 - x1) // 2
    crop = np.ascontiguousarray(group_photo[max(y1 - p, 0) : y2 + p, max(x1 - p, 0) : x2 + p])
    source = pipeline.prepare_source(crop, "standing")
    mesh = source.prepared.mesh
    lm, depth = source.prepared.face.landmarks, source.prepared.depth
    assert isinstance(mesh, MeshSource) and mesh.reads is not None and mesh.validity is not None
    assert lm is not None
    ridge = np.round(lm[[197, 195, 5]]).astype(int)
    plain = validity_map(crop, lm, depth, mesh.triangles)
    assert max(int(plain[y, x]) for x, y in ridge) > 128  # the colour test alone lets the window through
    assert max(int(mesh.validity[y, x]) for x, y in ridge) < 64


def test_the_device_rasteriser_reads_the_mirror_too(
    pipeline: Pipeline, group_photo: np.ndarray, source: SourceFace
) -> None:
    """The torch path (tensor_ops.warp_maps) reads the same mirrored source points as the host path."""
    torch = pytest.importorskip("torch")
    from engines.processors import tensor_ops as T

    faces = sorted(pipeline.detect([group_photo])[0], key=lambda f: f.box[0])
    x1, y1, x2, y2 = faces[1].box.astype(int)
    p = (x2 - x1) // 2
    crop = np.ascontiguousarray(group_photo[max(y1 - p, 0) : y2 + p, max(x1 - p, 0) : x2 + p])
    turned = pipeline.prepare_source(crop, "turned").prepared.mesh
    target = source.prepared.face.landmarks
    assert isinstance(turned, MeshSource) and turned.reads is not None and target is not None
    x0, y0 = np.floor(target.min(0)).astype(int) - 2
    h, w = (np.ceil(target.max(0)).astype(int) + 2 - (x0, y0))[::-1]
    local = target.astype(np.float64) - (x0, y0)
    want, got = (
        warp_maps(local, turned, int(h), int(w)),
        T.warp_maps(local, turned, int(h), int(w), torch.device("cpu")),
    )
    assert want is not None and got is not None
    (wx, wy, wc), (gx, gy, gc) = want, (t.numpy() for t in got)
    assert (wc == gc).all() and np.abs(wx - gx).max() < 1e-3 and np.abs(wy - gy).max() < 1e-3
    plain = warp_maps(local, replace(turned, reads=None), int(h), int(w))
    assert plain is not None and np.abs(plain[0] - wx)[wc & plain[2]].max() > 5.0  # the mirror is read
