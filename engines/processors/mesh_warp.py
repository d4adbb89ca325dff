"""Weight-free face swap, per frame: warp the source face onto each target face along the 468-point FaceMesh.

Why: no face-swap weights are reachable here, yet the gateway must do real, pose-following work out of the
box. The source's triangles (engines.source.mesh, made once) give a piecewise-affine map on every target
face, rasterised for all triangles at once on every second pixel and stretched back (`warp_maps`,
`coarse_warp_maps`), and sampled by one `cv2.remap` with the source's validity as a fourth channel (no source
hair or background is pasted). The target's light and colour go onto the source's skin (`shading`), and the
result is blended through a feathered hull mask reaching up to the brows, with the target's inner mouth and
eye openings cut out (`masks.region_mask`); Poisson blending is optional. With a session's `shape` above 0
the target's pixels first move to the source's face shape (`face_shape`, `mouth_hold`), the patch covering
the grown window. Turned heads: back-facing triangles are culled, the nearer of overlapping ones shows.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from engines.processors.alignment import extent
from engines.processors.face_shape import plan_warp, shape_offset, triangle_depths
from engines.processors.masks import region_mask, skin_weight
from engines.processors.mouth_hold import held_remap
from engines.processors.paste import (
    FacePatch,
    fade_in,
    feathered_polygon_mask,
    paste_back,
    seam_feather,
    translation,
)
from engines.processors.shading import relight_lab
from engines.source.mesh import MeshSource, signed_areas

MARGIN = 2  # px around the target mesh's bounding box
ERODE_FRAC = 0.015  # mask pulled in by this fraction of the face size...
BLUR_FRAC = 0.02  # ...and feathered by this much, so the seam fades inside the face
SHAPE = 1.0  # default strength of the source's face shape (0 = the target's geometry)


def visible_triangles(
    src_orientation: np.ndarray, dst_areas: np.ndarray, min_area_px: float = 0.5
) -> np.ndarray:
    """Which triangles to draw: same orientation as on the source (sign of its signed area) and still
    covering some pixels on the target (`dst_areas`: twice the signed areas, as `signed_areas` gives)."""
    return (np.sign(dst_areas) == src_orientation) & (np.abs(dst_areas) > 2.0 * min_area_px)


def front_facing(tris_src: np.ndarray, tris_dst: np.ndarray, min_area_px: float = 0.5) -> np.ndarray:
    """Triangles whose orientation on the target matches the source's and that still cover some pixels."""
    return visible_triangles(np.sign(signed_areas(tris_src)), signed_areas(tris_dst), min_area_px)


EDGE_TOL = 0.5  # px: a pixel centre this close outside a triangle still belongs to it (see warp_maps)
MAP_STEP = 2  # the swap rasterises its triangle map on every MAP_STEP-th pixel (see coarse_warp_maps)


def warp_maps(
    local: np.ndarray, source: MeshSource, h: int, w: int, min_area_px: float = 0.5
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """`warp_map` as (map_x, map_y, covered)."""
    drawn = warp_map(local, source, h, w, min_area_px)
    if drawn is None:
        return None
    both, covered = drawn
    return np.ascontiguousarray(both[..., 0]), np.ascontiguousarray(both[..., 1]), covered


def warp_map(
    local: np.ndarray, source: MeshSource, h: int, w: int, min_area_px: float = 0.5
) -> tuple[np.ndarray, np.ndarray] | None:
    """(map (h, w, 2) float32, covered (h, w) bool) for an (h, w) box whose target mesh is `local`: the
    source pixel each covered pixel samples, -1 elsewhere; None when no visible triangle covers a pixel.
    Triangles under `min_area_px` on the target are not drawn.

    Rasterised without a per-triangle Python loop (which cost ~900 `fillConvexPoly` calls per face): every
    visible triangle's rows are enumerated at once, each row's pixel span comes from the triangle's three edge
    functions (signed distance to the edge, >= -EDGE_TOL; the span is also clipped to the triangle's
    bounding box grown by EDGE_TOL, so slivers cannot spike), and each pixel's source position is the
    triangle's barycentric (= affine) map evaluated there. The tolerance makes neighbours overlap instead of
    leaving cracks, and reproduces OpenCV's fill coverage (IoU > 0.99 against it). Where triangles overlap,
    the nearest wins: they are drawn far to near in the target's pose (the source's 3-D mesh turned as the
    target is, `triangle_depths`), so a turned face's nose hides its far cheek instead of the triangle order
    deciding, pixel by pixel, which shows (a dotted seam along the nose). Without a 3-D shape: index order.
    """
    tris_dst = local[source.triangles]  # (T, 3, 2)
    area = signed_areas(tris_dst)
    vis = np.nonzero(visible_triangles(source.orientation, area, min_area_px))[0]
    if vis.size == 0:
        return None
    if source.shape is not None:  # far first: the nearest triangle is drawn last and wins
        depth = triangle_depths(source.shape, local, source.triangles)
        vis = vis[np.argsort(-depth[vis], kind="stable")]
    d, det = tris_dst[vis], area[vis]
    a, b, c = d[:, 0], d[:, 1], d[:, 2]
    ax, ay = a[:, 0], a[:, 1]
    e1x, e1y, e2x, e2y = b[:, 0] - ax, b[:, 1] - ay, c[:, 0] - ax, c[:, 1] - ay
    # Barycentrics (u, v) of a pixel p: p - a = u e1 + v e2, and its source point is s_a + u f1 + v f2: an
    # affine map per triangle, src = origin + x * gx + y * gy.
    f = source.edges[vis]  # (V, 2, 2): f1, f2
    f1, f2 = f[:, 0], f[:, 1]
    inv = 1.0 / det
    ux, uy, vx, vy = e2y * inv, -e2x * inv, -e1y * inv, e1x * inv  # du/dx, du/dy, dv/dx, dv/dy
    gx = ux[:, None] * f1 + vx[:, None] * f2
    gy = uy[:, None] * f1 + vy[:, None] * f2
    origin = source.tris[vis, 0] - ax[:, None] * gx - ay[:, None] * gy
    # Edges a->b, b->c, c->a as signed distances (inside >= 0): A x + B y + C >= -EDGE_TOL. Along a row
    # that is x >= or <= (-EDGE_TOL - B y - C) / A, by the sign of A: a slope and an intercept per edge.
    ex = np.stack([e1x, c[:, 0] - b[:, 0], -e2x], 1)  # (V, 3)
    ey = np.stack([e1y, c[:, 1] - b[:, 1], -e2y], 1)
    px, py = d[:, :, 0], d[:, :, 1]
    k = np.sign(det)[:, None] / np.sqrt(ex * ex + ey * ey)
    ea, eb, ec = -ey * k, ex * k, (ey * px - ex * py) * k + EDGE_TOL
    with np.errstate(divide="ignore", invalid="ignore"):
        slope, icept = -eb / ea, -ec / ea
    # Horizontal edges (A = 0) bound nothing here: the row range already stops at them (+- EDGE_TOL).
    left, right = ea > 0, ea < 0
    lo = np.minimum(np.minimum(a, b), c) - EDGE_TOL
    hi = np.maximum(np.maximum(a, b), c) + EDGE_TOL
    table = np.concatenate(
        [
            np.where(left, slope, 0.0),
            np.where(left, icept, -np.inf),  # 0-2, 3-5: lower bounds on x
            np.where(right, slope, 0.0),
            np.where(right, icept, np.inf),  # 6-8, 9-11: upper bounds on x
            lo[:, :1],
            hi[:, :1],
            gx,
            gy,
            origin,  # 12, 13, 14-15, 16-17, 18-19
        ],
        axis=1,
    )
    y0 = np.maximum(np.ceil(lo[:, 1]), 0).astype(np.int64)
    nrows = np.maximum(np.minimum(np.floor(hi[:, 1]), h - 1).astype(np.int64) - y0 + 1, 0)
    # One entry per (triangle, row).
    rt = np.repeat(np.arange(vis.size), nrows)
    yi = np.arange(rt.size) + np.repeat(y0 - (np.cumsum(nrows) - nrows), nrows)
    y = yi.astype(np.float64)
    r = table[rt]
    lower = np.maximum(
        np.maximum(r[:, 0] * y + r[:, 3], r[:, 1] * y + r[:, 4]), np.maximum(r[:, 2] * y + r[:, 5], r[:, 12])
    )
    upper = np.minimum(
        np.minimum(r[:, 6] * y + r[:, 9], r[:, 7] * y + r[:, 10]),
        np.minimum(r[:, 8] * y + r[:, 11], r[:, 13]),
    )
    xl = np.maximum(np.ceil(lower), 0)
    n = np.maximum(np.minimum(np.floor(upper), w - 1) - xl + 1, 0).astype(np.int64)
    total = int(n.sum())
    if total == 0:
        return None
    # One entry per covered pixel: its row entry, x, and flat index into the box.
    seg = np.repeat(np.arange(rt.size), n)
    x = np.arange(total) + np.repeat(xl.astype(np.int64) - (np.cumsum(n) - n), n)
    pix = x + np.repeat(yi * w, n)
    tid = np.repeat((vis.astype(np.int32) + 1)[rt], n)
    ids = np.zeros(h * w, dtype=np.int32)
    ids[pix] = tid
    # Exactly one writer per pixel, whatever order fancy assignment took: the entries that lost the id
    # write into a spare slot past the box instead.
    dst = np.where(ids[pix] == tid, pix, h * w)
    xf = x.astype(np.float32)
    row_x = (r[:, 18] + r[:, 16] * y).astype(np.float32)  # source point at (0, y), per row entry
    row_y = (r[:, 19] + r[:, 17] * y).astype(np.float32)
    both = np.full((h * w + 1, 2), -1.0, dtype=np.float32)  # x, y interleaved: cv2.remap's one-map layout
    both[dst, 0] = r[:, 14].astype(np.float32)[seg] * xf + row_x[seg]
    both[dst, 1] = r[:, 15].astype(np.float32)[seg] * xf + row_y[seg]
    return both[:-1].reshape(h, w, 2), (ids > 0).reshape(h, w)


def coarse_warp_maps(
    local: np.ndarray, source: MeshSource, h: int, w: int, step: int = MAP_STEP
) -> tuple[np.ndarray, np.ndarray] | None:
    """`warp_maps` rasterised on every `step`-th pixel of the (h, w) box and stretched back to every pixel:
    (map (h, w, 2) float32 for cv2.remap, covered (h, w) bool); None as warp_maps.

    The map is piecewise affine and continuous across the edges two triangles share, so linear interpolation
    between samples `step` px apart departs from it only at the bends (under a pixel at the 99th percentile
    on a tracked 640x360 clip), for a quarter of the rasterising work at step 2. A pixel counts as covered
    when every sample it is interpolated from is covered (uncovered samples hold -1, not a position)."""
    if step <= 1:
        return warp_map(local, source, h, w)
    hs, ws = (h + step - 2) // step + 1, (w + step - 2) // step + 1  # samples up to the box's last pixel
    sampled = warp_map(local / step, source, hs, ws, 0.5 / (step * step))  # the same triangles drawn
    if sampled is None:
        return None
    samples, covered = sampled
    up = np.array([[1.0 / step, 0.0, 0.0], [0.0, 1.0 / step, 0.0]])
    flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
    both = np.asarray(cv2.warpAffine(samples, up, (w, h), flags=flags, borderMode=cv2.BORDER_REPLICATE))
    solid = covered.view(np.uint8) * np.uint8(255)  # 255 only where all the samples around are 255
    cover = cv2.warpAffine(solid, up, (w, h), flags=flags, borderMode=cv2.BORDER_REPLICATE)
    scale = source.span / max(float((local.max(0) - local.min(0)).max()), 1e-6)
    torn = torn_samples(samples, covered, step * scale)
    if torn.any():  # there the nearest sample, not a blend of two far-apart source points
        ys, xs = np.nonzero(cv2.warpAffine(torn.view(np.uint8), up, (w, h), flags=flags))
        near_y = np.minimum((ys + step // 2) // step, hs - 1)
        near_x = np.minimum((xs + step // 2) // step, ws - 1)
        both[ys, xs] = samples[near_y, near_x]
    return both, np.asarray(cover == 255)


TEAR_FACTOR = 4.0  # a step between neighbouring samples this many times the expected one is a tear


def torn_samples(samples: np.ndarray, covered: np.ndarray, expected: float) -> np.ndarray:
    """(hs, ws) bool: samples on either side of a tear in the sampled map (hs, ws, 2), where neighbouring
    covered samples read source points more than TEAR_FACTOR x `expected` (+ 1 px) apart, `expected` being
    the source distance between neighbouring samples at the face's overall scale: where triangles overlap (a
    turned face's nose over its far cheek, the nearer drawn) the map jumps, and interpolating
    across the jump would read whatever lies between the two source points (hair, a lip)."""
    limit2 = (TEAR_FACTOR * expected + 1.0) ** 2
    torn = np.zeros(covered.shape, bool)
    dx = samples[:, 1:] - samples[:, :-1]
    dy = samples[1:] - samples[:-1]
    jump_x = (dx[..., 0] * dx[..., 0] + dx[..., 1] * dx[..., 1] > limit2) & covered[:, 1:] & covered[:, :-1]
    jump_y = (dy[..., 0] * dy[..., 0] + dy[..., 1] * dy[..., 1] > limit2) & covered[1:] & covered[:-1]
    torn[:, 1:] |= jump_x
    torn[:, :-1] |= jump_x
    torn[1:] |= jump_y
    torn[:-1] |= jump_y
    return torn


class MeshWarpSwapper:
    """Stateless: everything per call is local, the source's data is read-only. Safe across threads."""

    name = "mesh_warp"

    def __init__(self, poisson: bool = False, map_step: int = MAP_STEP) -> None:
        self.poisson = poisson
        self.map_step = map_step  # the triangle map rasterised every this many pixels (1: every pixel)

    def swap(
        self,
        jobs: Sequence[tuple[np.ndarray, np.ndarray, MeshSource]],
        keep: Sequence[tuple[str, ...]] | None = None,
        shape: Sequence[float] | None = None,
        brows_rest: Sequence[np.ndarray | None] | None = None,
    ) -> list[FacePatch | None]:
        """One patch per (frame, target landmarks (468, 2), source) job; None where the face is off-frame.
        `keep[i]`: the target regions job i keeps from the frame (mouth, eyes); `shape[i]`: how much of the
        source's face shape it takes (0..1; default SHAPE); `brows_rest[i]`: its target's brows at rest
        (the tracker's; None: a still picture)."""
        return [
            self.swap_one(
                frame,
                target,
                source,
                keep[i] if keep else (),
                shape[i] if shape is not None else SHAPE,
                brows_rest[i] if brows_rest is not None else None,
            )
            for i, (frame, target, source) in enumerate(jobs)
        ]

    def swap_one(
        self,
        frame: np.ndarray,
        target: np.ndarray,
        source: MeshSource,
        keep: tuple[str, ...] = (),
        shape: float = SHAPE,
        brows_rest: np.ndarray | None = None,
    ) -> FacePatch | None:
        plan = (
            plan_warp(frame.shape[:2], target, shape_offset(source.shape, target, brows_rest), shape)
            if shape > 0.0 and source.shape is not None
            else None
        )
        if plan is None:
            return self.face_patch(frame, target, source, keep)
        x0, y0, x1, y1 = plan.window
        moved = held_remap(frame, plan, target)
        face = self.face_patch(moved, plan.landmarks - np.array((x0, y0), np.float32), source, keep)
        if face is not None:
            paste_back(moved, face)
        # the window's edge did not move (the map is the identity there): the whole window goes in as is
        whole = np.ones((y1 - y0, x1 - x0), np.float32)
        return FacePatch(image=moved, mask=whole, matrix=translation(x0, y0), opaque=True)

    def face_patch(
        self, frame: np.ndarray, target: np.ndarray, source: MeshSource, keep: tuple[str, ...] = ()
    ) -> FacePatch | None:
        """The source's face warped onto `target` (468, 2) in `frame`: the patch over the mesh's window."""
        window = face_window(frame.shape[:2], target)
        if window is None:
            return None
        x0, y0, x1, y1 = window
        h, w = y1 - y0, x1 - x0
        local = target.astype(np.float64) - (x0, y0)
        maps = coarse_warp_maps(local, source, h, w, self.map_step)
        if maps is None:
            return None
        texture_map, covered = maps
        # the source's L*a*b* (its conversion made once) and validity, warped by one remap
        texture = cv2.remap(
            source.lab, texture_map, None, interpolation=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )
        warped = np.ascontiguousarray(texture[:, :, :3])

        size = float(max(h, w))
        hull = cv2.convexHull(local[source.mask_points].astype(np.float32)).reshape(-1, 2)
        erode, blur = max(1, int(size * ERODE_FRAC)), max(0.5, size * BLUR_FRAC)
        edge = feathered_polygon_mask(h, w, hull, erode=erode, blur=blur)
        rest = fade_in(covered, erode)  # from 0 where triangles were culled: no step there
        # nor where the source shows no face (softened: at a fold its samples are the nearest, in blocks)
        rest *= cv2.GaussianBlur(texture[:, :, 3], (0, 0), blur / 2) * np.float32(1.0 / 255.0)
        mask = edge * rest
        roi = frame[y0:y1, x0:x1]
        skin = (mask > 0.5) & skin_weight((h, w), local, size)
        image: np.ndarray = relight_lab(warped, roi, skin, size, mask)
        if self.poisson:  # the relit face's gradients cloned in: its features' colour and contrast as relit
            relit = np.clip(image + np.float32(0.5), 0, 255).astype(np.uint8)
            cloned = _poisson(relit, roi, mask)
            if cloned is not None:
                image = cloned.astype(np.float32)
        mask = seam_feather(edge, hull, erode, image, roi, blur) * rest  # wider where the colours step
        if keep:  # after blending: the clone and the colour statistics see the whole face
            mask *= 1.0 - region_mask((h, w), local, keep, size)
        return FacePatch(image=image, mask=mask, matrix=translation(x0, y0))


def _poisson(warped: np.ndarray, roi: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    """The warped face cloned into the target region with matched gradients (None when OpenCV refuses: a
    mask touching the region's edge)."""
    binary = (mask > 0.05).astype(np.uint8) * 255
    binary[[0, -1], :] = 0
    binary[:, [0, -1]] = 0
    ys, xs = np.nonzero(binary)
    if ys.size < 16:
        return None
    x0, x1, y0, y1 = int(xs.min()), int(xs.max()), int(ys.min()), int(ys.max())
    centre = ((x0 + x1 + 1) // 2, (y0 + y1 + 1) // 2)
    try:
        return np.asarray(
            cv2.seamlessClone(
                np.ascontiguousarray(warped), np.ascontiguousarray(roi), binary, centre, cv2.NORMAL_CLONE
            )
        )
    except cv2.error:
        return None


def face_window(frame_hw: tuple[int, ...], target: np.ndarray) -> tuple[int, int, int, int] | None:
    """(x0, y0, x1, y1): the target mesh's extent plus MARGIN, inside the frame; None when under 4 px."""
    fh, fw = frame_hw[:2]
    box = extent(target)
    lo = np.floor(box[:2]).astype(int) - MARGIN
    hi = np.ceil(box[2:]).astype(int) + MARGIN
    x0, y0 = max(int(lo[0]), 0), max(int(lo[1]), 0)
    x1, y1 = min(int(hi[0]), fw), min(int(hi[1]), fh)
    if x1 - x0 < 4 or y1 - y0 < 4:
        return None
    return x0, y0, x1, y1
