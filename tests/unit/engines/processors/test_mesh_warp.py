"""mesh_warp swap of a real face onto a real talking-head clip: local, visible, and following the target."""

from __future__ import annotations

from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from engines.frames import FrameItem, SourceFace
from engines.pipeline import Pipeline
from engines.processors.mesh_warp import MeshWarpSwapper
from engines.processors.paste import FacePatch, paste_back, translation
from engines.source.mesh import EYE_A, EYE_B, MeshSource, face_mask_points, triangulate


@pytest.fixture(scope="module")
def carphone(media: dict[str, Path]) -> list[np.ndarray]:
    """Ten frames spread over the first 3 s of the clip (the head moves and talks)."""
    frames = []
    with av.open(str(media["carphone_pristine.mp4"])) as c:
        for i, frame in enumerate(c.decode(video=0)):
            if i % 8 == 0:
                frames.append(np.asarray(frame.to_ndarray(format="rgb24")))
            if len(frames) == 10:
                break
    return frames


def test_source_is_triangulated_once(source: SourceFace) -> None:
    mesh = source.prepared.mesh
    assert isinstance(mesh, MeshSource)
    assert mesh.landmarks.shape == (468, 2)
    # Delaunay of 468 points with h hull points has 2n - 2 - h triangles.
    assert 800 < len(mesh.triangles) < 934
    assert mesh.triangles.min() >= 0 and mesh.triangles.max() < 468
    assert len(mesh.mask_points) > 400  # the blend mask: the face up into the forehead


def test_blend_mask_stops_part_way_up_a_high_forehead(source: SourceFace) -> None:
    # the same face with its forehead's top points moved up: they leave the blend mask (target fringes)
    pts = source.prepared.mesh.landmarks.astype(np.float32)
    assert len(face_mask_points(pts)) > 460
    a, b = pts[list(EYE_A)].mean(0), pts[list(EYE_B)].mean(0)
    up = np.array([(b - a)[1], (a - b)[0]]) / float(np.linalg.norm(b - a))  # toward the brows
    top = np.argsort((pts - (a + b) / 2) @ up)[-6:]
    high = pts.copy()
    high[top] += up * float(np.linalg.norm(b - a))
    kept = face_mask_points(high)
    assert 400 < len(kept) < 468 and not np.isin(top, kept).any()


def test_triangulate_covers_a_square_grid() -> None:
    xs, ys = np.meshgrid(np.arange(4.0), np.arange(4.0))
    pts = np.stack([xs.ravel(), ys.ravel()], 1) * 10
    tris = triangulate(pts)
    a, b = pts[tris[:, 1]] - pts[tris[:, 0]], pts[tris[:, 2]] - pts[tris[:, 0]]
    area = np.abs(a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]).sum() / 2
    assert len(tris) == 18 and area == pytest.approx(900.0)


def test_swap_is_local_visible_and_follows_the_target(
    pipeline: Pipeline, source: SourceFace, carphone: list[np.ndarray]
) -> None:
    before = pipeline.detect(carphone)
    assert all(len(f) == 1 for f in before)
    outputs = pipeline.process([FrameItem(image=f, source=source) for f in carphone])
    centres_in, centres_out = [], []
    for frame, out, faces in zip(carphone, outputs, before, strict=True):
        assert out.image.shape == frame.shape and out.image.dtype == np.uint8
        assert out.faces == 1
        face = faces[0]
        w, h = face.width, face.height
        # the face's region: its mesh's extent (the swap moves the outline to the source's) grown by 15 %
        lm = pipeline.landmarker.run([(frame, face)])[0].landmarks
        lo, hi = lm.min(0), lm.max(0)
        mw, mh = hi - lo
        x1, y1 = int(lo[0] - 0.15 * mw), int(lo[1] - 0.15 * mh)
        x2, y2 = int(hi[0] + 0.15 * mw) + 1, int(hi[1] + 0.15 * mh) + 1
        diff = np.abs(out.image.astype(np.int16) - frame.astype(np.int16)).max(axis=2)
        outside = diff.copy()
        outside[max(y1, 0) : y2, max(x1, 0) : x2] = 0
        assert outside.max() == 0, "pixels changed outside the face"
        inner = diff[
            int(face.box[1] + 0.3 * h) : int(face.box[3] - 0.2 * h),
            int(face.box[0] + 0.25 * w) : int(face.box[2] - 0.25 * w),
        ]
        assert inner.mean() > 8, "the face itself barely changed"
        centres_in.append(face.kps5.mean(0))
    after = pipeline.detect([o.image for o in outputs])
    assert all(len(f) == 1 for f in after)
    for faces in after:
        centres_out.append(faces[0].kps5.mean(0))
    c_in, c_out = np.array(centres_in), np.array(centres_out)
    assert np.ptp(c_in[:, 0]) > 5, "the clip should move the face"
    # The swapped face is where the target's face is, frame by frame (QCIF: face ~45 px wide).
    assert np.abs(c_out - c_in).max() < 4.0
    # And it moves with it.
    assert np.corrcoef(c_in[:, 0], c_out[:, 0])[0, 1] > 0.9


def test_every_face_in_a_group_is_swapped(
    pipeline: Pipeline, source: SourceFace, group_photo: np.ndarray
) -> None:
    out = pipeline.process([FrameItem(image=group_photo, source=source)])[0]
    assert out.faces == 6 and out.batch_sizes["face_swapper"] == 6
    for face in pipeline.detect([group_photo])[0]:
        x1, y1, x2, y2 = face.box.astype(int)
        region = np.abs(out.image[y1:y2, x1:x2].astype(np.int16) - group_photo[y1:y2, x1:x2]).mean()
        assert region > 5


def test_the_poisson_blend_clones_the_relit_face(
    pipeline: Pipeline, source: SourceFace, carphone: list[np.ndarray]
) -> None:
    """The optional Poisson blend takes its gradients from the relit face, so the features keep the colour
    the default gives them: on a grey target the face's colour detail is the default's (scaled down with the
    skins' chroma), not the source photo's warm lips and lids (about 3.5 times as spread)."""
    grey = np.ascontiguousarray(np.repeat(cv2.cvtColor(carphone[0], cv2.COLOR_RGB2GRAY)[:, :, None], 3, 2))
    face = pipeline.detect([grey])[0][0]
    landmarks = pipeline.landmarker.run([(grey, face)])[0].landmarks
    assert landmarks is not None and source.prepared.mesh is not None
    spread = []
    for poisson in (False, True):
        swapper = MeshWarpSwapper(poisson=poisson)
        patch = swapper.face_patch(grey, landmarks, source.prepared.mesh, ("mouth", "eyes"))
        assert patch is not None
        core = patch.mask > 0.9
        lab = cv2.cvtColor(np.clip(patch.image, 0, 255).astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB)
        spread.append(lab[core][:, 1:].std(0))
    assert core.sum() > 500
    assert (spread[1] < 1.5 * spread[0]).all(), spread


def test_paste_touches_only_the_patch_footprint() -> None:
    frame = np.full((50, 60, 3), 10, np.uint8)
    patch = FacePatch(
        image=np.full((10, 12, 3), 200.0, np.float32),
        mask=np.ones((10, 12), np.float32),
        matrix=translation(20, 30),
    )
    assert paste_back(frame, patch) == (20, 30, 32, 40)
    assert (frame[30:40, 20:32] == 200).all()
    frame[30:40, 20:32] = 10
    assert (frame == 10).all()


def test_folded_triangles_of_a_turned_face_are_culled() -> None:
    """Where a head turns away the 2-D mesh folds: mirrored or collapsed triangles must not be drawn."""
    from engines.processors.mesh_warp import front_facing

    src = np.array(
        [[[0, 0], [10, 0], [0, 10]], [[0, 0], [10, 0], [0, 10]], [[0, 0], [10, 0], [0, 10]]], dtype=np.float64
    )
    dst = np.array(
        [
            [[5, 5], [25, 5], [5, 25]],  # same orientation, scaled: visible
            [[0, 0], [0, 10], [10, 0]],  # mirrored (folded over): back-facing
            [[0, 0], [10, 0], [20, 0.01]],  # collapsed to a sliver: nothing to draw
        ],
        dtype=np.float64,
    )
    assert front_facing(src, dst).tolist() == [True, False, False]


def _inside(tri: np.ndarray, xs: np.ndarray, ys: np.ndarray, tol: float) -> np.ndarray:
    """Pixel centres within `tol` px outside triangle `tri` (3, 2), either winding."""
    out = np.ones(xs.shape, bool)
    e1, e2 = tri[1] - tri[0], tri[2] - tri[0]
    sign = np.sign(e1[0] * e2[1] - e1[1] * e2[0])
    for k in range(3):
        p, q = tri[k], tri[(k + 1) % 3]
        ex, ey = q[0] - p[0], q[1] - p[1]
        dist = sign * (ex * (ys - p[1]) - ey * (xs - p[0])) / max(float(np.hypot(ex, ey)), 1e-12)
        out &= dist >= -tol
    return out


def test_overlapping_triangles_of_a_turned_face_show_the_nearest(source: SourceFace) -> None:
    """A face turned 50 degrees: its nose's triangles cover the far cheek's. Where they overlap the map
    reads the nearer surface, as a painter drawing far to near would (the triangle order is not depth)."""
    from engines.processors.face_shape import triangle_depths
    from engines.processors.mesh_warp import visible_triangles, warp_maps
    from engines.source.mesh import signed_areas

    mesh = source.prepared.mesh
    assert isinstance(mesh, MeshSource) and mesh.shape is not None
    a = np.deg2rad(50.0)
    rot = np.array([[np.cos(a), 0.0, np.sin(a)], [0.0, 1.0, 0.0], [-np.sin(a), 0.0, np.cos(a)]])
    local = (mesh.shape.points @ rot.T)[:, :2]
    local = local - local.min(0) + 8.0
    h, w = (np.ceil(local.max(0)) + 8).astype(int)[::-1]
    got = warp_maps(local, mesh, h, w)
    assert got is not None
    map_x, map_y, covered = got

    tris = local[mesh.triangles]
    vis = np.nonzero(visible_triangles(mesh.orientation, signed_areas(tris)))[0]
    depth = triangle_depths(mesh.shape, local, mesh.triangles)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    nearest = np.full((h, w), -1)
    by_index = np.full((h, w), -1)
    strict = np.zeros((h, w), int)
    loose = np.zeros((h, w), int)
    for t in vis[np.argsort(-depth[vis], kind="stable")]:  # far to near: the last drawn is the nearest
        inside = _inside(tris[t], xs, ys, 0.0)
        nearest[inside] = t
        strict += inside
        loose += _inside(tris[t], xs, ys, 0.5)
    for t in vis:
        by_index[_inside(tris[t], xs, ys, 0.0)] = t
    # pixels no triangle's edge tolerance reaches unless it holds them outright, covered more than once
    clear = (loose == strict) & (strict >= 2)
    differs = clear & (nearest != by_index)
    assert differs.sum() >= 20  # the order matters on this face
    assert covered[clear].all()
    t = nearest[clear]
    yc, xc = ys[clear], xs[clear]
    tri = tris[t]
    e1, e2 = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
    det = e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]
    px, py = xc - tri[:, 0, 0], yc - tri[:, 0, 1]
    u = (px * e2[:, 1] - py * e2[:, 0]) / det
    v = (e1[:, 0] * py - e1[:, 1] * px) / det
    want = mesh.tris[t, 0] + u[:, None] * mesh.edges[t, 0] + v[:, None] * mesh.edges[t, 1]
    assert np.abs(map_x[clear] - want[:, 0]).max() < 1e-2
    assert np.abs(map_y[clear] - want[:, 1]).max() < 1e-2
