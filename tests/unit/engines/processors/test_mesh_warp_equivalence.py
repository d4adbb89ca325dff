"""mesh_warp's faster steps against the algorithms they replaced, on real faces: the picture must not change.

The references below are the old algorithms, kept here (not in the product) so the comparison can fail:
- rasterisation: one `cv2.fillConvexPoly` per visible triangle into a triangle-id map (painter's order, far
  to near), per-triangle affines from `np.linalg.solve`, applied per pixel;
- colour transfer: both whole boxes converted to float LAB, statistics from boolean gathers;
- the swap's triangle map at every pixel (`warp_maps`), which it now rasterises every second pixel.
"""

from __future__ import annotations

import av
import cv2
import numpy as np
import pytest

from engines.frames import FaceTrack, FrameItem, SourceFace
from engines.pipeline import Pipeline
from engines.processors.face_shape import triangle_depths
from engines.processors.mesh_warp import (
    MARGIN,
    MeshWarpSwapper,
    coarse_warp_maps,
    front_facing,
    torn_samples,
    warp_map,
    warp_maps,
)
from engines.processors.paste import paste_back
from engines.source.mesh import MeshSource


def reference_warp_maps(
    local: np.ndarray, source: MeshSource, h: int, w: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    tris_dst = local[source.triangles]
    tris_src = (source.landmarks.astype(np.float64) - source.origin)[source.triangles]  # the texture's box
    a = np.concatenate([tris_dst, np.ones((*tris_dst.shape[:2], 1))], axis=2)
    degenerate = np.abs(np.linalg.det(a)) < 1e-6
    a[degenerate] += np.eye(3) * 1e-3
    affines = np.linalg.solve(a, tris_src).astype(np.float32)
    visible = front_facing(tris_src, tris_dst)
    ids = np.zeros((h, w), dtype=np.uint16)
    fixed = np.round(tris_dst * 16).astype(np.int32)
    order = np.nonzero(visible)[0]
    if source.shape is not None:  # drawn far to near in the target's pose
        depth = triangle_depths(source.shape, local, source.triangles)
        order = order[np.argsort(-depth[order], kind="stable")]
    for t in order:
        cv2.fillConvexPoly(ids, fixed[t], int(t) + 1, lineType=cv2.LINE_8, shift=4)
    ys, xs = np.nonzero(ids)
    if ys.size == 0:
        return None
    m = affines[ids[ys, xs].astype(np.int64) - 1]
    xf, yf = xs.astype(np.float32), ys.astype(np.float32)
    map_x = np.full((h, w), -1.0, dtype=np.float32)
    map_y = np.full((h, w), -1.0, dtype=np.float32)
    map_x[ys, xs] = xf * m[:, 0, 0] + yf * m[:, 1, 0] + m[:, 2, 0]
    map_y[ys, xs] = xf * m[:, 0, 1] + yf * m[:, 1, 1] + m[:, 2, 1]
    return map_x, map_y, ids > 0


@pytest.fixture(scope="module")
def faces(
    pipeline: Pipeline, source: SourceFace, media: dict[str, object], astronaut: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(frame, tracked 468-point mesh): the talking carphone head at 320x240 (every 6th of 60 frames) and
    the astronaut portrait at two scales."""
    frames: list[np.ndarray] = []
    with av.open(str(media["carphone_pristine.mp4"])) as c:
        for i, decoded in enumerate(c.decode(video=0)):
            if i % 6 == 0:
                rgb = np.asarray(decoded.to_ndarray(format="rgb24"), dtype=np.uint8)
                frames.append(np.asarray(cv2.resize(rgb, (320, 240), interpolation=cv2.INTER_CUBIC)))
            if i == 59:
                break
    frames += [np.ascontiguousarray(cv2.resize(astronaut, (320, 320))[40:280]), astronaut]
    out: list[tuple[np.ndarray, np.ndarray]] = []
    for frame in frames:
        track = FaceTrack()
        pipeline.process([FrameItem(frame, source, track=track, time_s=0.0)])
        assert track.faces, "the tracker should hold the face"
        mesh = track.faces[0].shown.landmarks
        assert mesh is not None
        out.append((frame, mesh))
    return out


def _box(frame: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, int, int]:
    lo = np.floor(target.min(0)).astype(int) - MARGIN
    hi = np.ceil(target.max(0)).astype(int) + MARGIN
    x0, y0 = max(int(lo[0]), 0), max(int(lo[1]), 0)
    x1, y1 = min(int(hi[0]), frame.shape[1]), min(int(hi[1]), frame.shape[0])
    return target.astype(np.float64) - (x0, y0), y1 - y0, x1 - x0


def test_warp_maps_match_the_per_triangle_fill(
    source: SourceFace, faces: list[tuple[np.ndarray, np.ndarray]]
) -> None:
    mesh = source.prepared.mesh
    assert isinstance(mesh, MeshSource)
    for frame, target in faces:
        local, h, w = _box(frame, target)
        new, old = warp_maps(local, mesh, h, w), reference_warp_maps(local, mesh, h, w)
        assert new is not None and old is not None
        (nx, ny, nc), (ox, oy, oc) = new, old
        iou = (nc & oc).sum() / (nc | oc).sum()
        assert iou > 0.99, f"coverage IoU {iou:.4f}"
        assert (nx[~nc] == -1).all() and (ny[~nc] == -1).all()
        both = nc & oc
        # The same triangle's map almost everywhere; a pixel on a shared edge may take the neighbour's, whose
        # map there differs by a fraction of a pixel (the piecewise-affine warp is continuous).
        shift = np.hypot(nx - ox, ny - oy)[both]
        assert (shift < 0.01).mean() > 0.9 and (shift < 0.5).mean() > 0.99
        wn = cv2.remap(mesh.box_image, nx, ny, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        wo = cv2.remap(mesh.box_image, ox, oy, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        mad = np.abs(wn.astype(np.int16) - wo.astype(np.int16))[both].mean()
        assert mad < 0.5, f"warped image differs by {mad:.2f} grey levels on average"


def test_the_map_sampled_every_second_pixel_matches_the_full_map(
    source: SourceFace, faces: list[tuple[np.ndarray, np.ndarray]]
) -> None:
    """Rasterised every second pixel and stretched, the map stays within a pixel of the full one where both
    cover (the warp is continuous between triangles), coverage is the same but for the rim, and a pixel
    counted covered is interpolated from covered samples only."""
    mesh = source.prepared.mesh
    for frame, target in faces:
        local, h, w = _box(frame, target)
        full, coarse = warp_maps(local, mesh, h, w), coarse_warp_maps(local, mesh, h, w, step=2)
        assert full is not None and coarse is not None
        (fx, fy, fc), (both_maps, cc) = full, coarse
        assert both_maps.shape == (h, w, 2) and both_maps.dtype == np.float32 and cc.shape == (h, w)
        # coverage differs only on the rim: within 2 px of the full map's edge
        k = np.ones((5, 5), np.uint8)
        full_u8 = fc.astype(np.uint8)
        rim = (cv2.dilate(full_u8, k) > 0) & ~(cv2.erode(full_u8, k) > 0)
        assert not ((fc ^ cc) & ~rim).any()
        assert (fc & cc).sum() / (fc | cc).sum() > 0.9
        # every sample a covered pixel is interpolated from is covered (none holds the uncovered -1)
        hs, ws = h // 2 + 1, w // 2 + 1
        sampled = warp_map(local / 2, mesh, hs, ws, 0.125)
        assert sampled is not None
        ys, xs = np.nonzero(cc)
        for dy in (0, 1):
            for dx in (0, 1):
                near = np.minimum((ys + dy) // 2, hs - 1), np.minimum((xs + dx) // 2, ws - 1)
                assert sampled[1][near].all()
        shift = np.hypot(both_maps[..., 0] - fx, both_maps[..., 1] - fy)[fc & cc]
        assert np.percentile(shift, 50) < 0.05 and np.percentile(shift, 98) < 1.0
        same = coarse_warp_maps(local, mesh, h, w, step=1)
        assert same is not None and (same[0][..., 0] == fx).all() and (same[1] == fc).all()


def test_a_tear_in_the_sampled_map_is_found_and_a_smooth_map_has_none() -> None:
    """Where overlapping triangles make the map jump, the samples on both sides are marked (the stretched
    map takes the nearest there, not a blend of two far-apart source points); a smooth map has no tear."""
    ys, xs = np.mgrid[0:20, 0:30].astype(np.float32)
    smooth = np.dstack([1.5 * xs + 0.2 * ys, 1.4 * ys - 0.1 * xs])
    covered = np.ones((20, 30), bool)
    assert not torn_samples(smooth, covered, 1.5).any()
    torn = smooth.copy()
    torn[:, 15:, 0] += 40.0  # the right half reads 40 px further along the source
    marked = torn_samples(torn, covered, 1.5)
    assert marked[:, 14:16].all() and marked.sum() == 2 * 20
    covered[:, 15] = False  # no tear is read across an uncovered sample
    assert not torn_samples(torn, covered, 1.5).any()


def test_the_swap_with_the_sampled_map_pastes_the_same_face(
    source: SourceFace, faces: list[tuple[np.ndarray, np.ndarray]]
) -> None:
    """What the swap pastes into the frame with the map sampled every second pixel and with the full map:
    under a grey level apart on average, and almost no pixel visibly apart."""
    mesh = source.prepared.mesh
    keep = ("mouth", "eyes")

    def pasted(swapper: MeshWarpSwapper) -> list[np.ndarray]:
        out = []
        for frame, target in faces:
            patch = swapper.swap_one(frame, target, mesh, keep)
            assert patch is not None
            work = frame.copy()
            paste_back(work, patch)
            out.append(work.astype(np.int16))
        return out

    sampled, full = pasted(MeshWarpSwapper(map_step=2)), pasted(MeshWarpSwapper(map_step=1))
    changed = [(np.abs(b - frame).max(2) > 8).mean() for b, (frame, _) in zip(full, faces, strict=True)]
    assert np.median(changed) > 0.01  # the swap changed the pictures
    for a, b in zip(sampled, full, strict=True):
        diff = np.abs(a - b).max(2)
        assert diff.mean() < 0.2 and (diff > 8).mean() < 0.002


def test_swap_patch_matches_the_per_triangle_fill(
    source: SourceFace, faces: list[tuple[np.ndarray, np.ndarray]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole patch (colour transfer, masks, kept mouth/eyes) through both rasterisers, at every pixel."""
    import engines.processors.mesh_warp as mw

    mesh = source.prepared.mesh
    swapper = MeshWarpSwapper(map_step=1)
    keep = ("mouth", "eyes")
    new = [swapper.swap_one(frame, target, mesh, keep) for frame, target in faces]
    monkeypatch.setattr(mw, "warp_maps", reference_warp_maps)
    old = [swapper.swap_one(frame, target, mesh, keep) for frame, target in faces]
    for n, o in zip(new, old, strict=True):
        assert n is not None and o is not None
        assert n.image.shape == o.image.shape and (n.matrix == o.matrix).all()
        weight = np.maximum(n.mask, o.mask)
        assert np.abs(n.mask - o.mask).mean() < 0.01
        # What would be pasted: image weighted by the mask (outside coverage the image is undefined).
        diff = np.abs(n.image * n.mask[..., None] - o.image * o.mask[..., None])
        assert diff[weight > 0].mean() < 1.0


def test_paste_blend_matches_the_old_formula(
    source: SourceFace, faces: list[tuple[np.ndarray, np.ndarray]]
) -> None:
    mesh = source.prepared.mesh
    swapper = MeshWarpSwapper()
    for frame, target in faces:
        patch = swapper.swap_one(frame, target, mesh, ("mouth", "eyes"))
        assert patch is not None
        out = frame.copy()
        box = paste_back(out, patch)
        assert box is not None and (patch.matrix[:, :2] == np.eye(2)).all()
        x0, y0, x1, y1 = box
        a = np.clip(patch.mask, 0.0, 1.0)[:, :, None]
        region = frame[y0:y1, x0:x1].astype(np.float32)
        expected = np.clip(region * (1.0 - a) + patch.image * a, 0, 255) + 0.5
        diff = np.abs(out[y0:y1, x0:x1].astype(np.int16) - expected.astype(np.uint8))
        assert diff.max() <= 1 and (diff > 0).mean() < 1e-3  # float rounding at exact .5 only
        assert (out[y0:y1, x0:x1] != frame[y0:y1, x0:x1]).any()


def test_integer_translation_check_matches_allclose() -> None:
    from engines.processors.paste import _is_integer_translation, translation

    rng = np.random.default_rng(3)
    cases = [
        translation(20, 30),
        translation(-7, 0),
        np.array([[1, 0, 3.4], [0, 1, 2]], np.float32),
        np.array([[1, 1e-9, 3], [0, 1, 2 + 1e-7]], np.float64),
        np.array([[0.99, 0, 3], [0, 1, 2]], np.float32),
        np.array([[1, 0, 3], [0.01, 1, 2]], np.float32),
    ]
    cases += [
        np.hstack(
            [np.eye(2) + rng.normal(0, s, (2, 2)), rng.integers(-50, 50, (2, 1)) + rng.normal(0, s, (2, 1))]
        )
        for s in (0.0, 1e-9, 1e-6, 1e-3)
        for _ in range(5)
    ]
    for m in cases:
        expected = bool(np.allclose(m[:, :2], np.eye(2)) and np.allclose(m[:, 2], np.round(m[:, 2])))
        assert _is_integer_translation(m) == expected, m
    assert _is_integer_translation(translation(20, 30))
    assert not _is_integer_translation(cases[2])
