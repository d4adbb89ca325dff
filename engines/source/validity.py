"""Which of the source image's pixels may be pasted onto a target's face, computed once per source.

Why: the blend region reaches up the forehead and out to the cheeks' edge, and there the source often shows
hair, an ear, or the background past a turned cheek; pasted, those sit on the target's face (an identity
measure even rewards them: the picture is the judge). Valid: inside the source's outline pulled in
`OUTLINE_PULL`, skin-coloured (near its own cheeks' colour in CIE Lab, robustly; lightness weighted less) and
as smooth as the cheeks (hair is told by its strands); lips and brows always, the eyes with their lids, the
nose and upper lip where near the cheeks' chroma. Specks are opened away, holes under `FILL_FRAC` closed where
near skin colour, the edge feathered; stored 0..255, warped with the source's pixels (one RGBA remap). Skin
colour is read only where the face is seen from the front; nothing is valid seen edge-on (`facing_map`).
"""

from __future__ import annotations

import cv2
import numpy as np

from engines.processors.masks import EYE_LEFT, EYE_RIGHT, OUTER_LIPS

OUTLINE_PULL = 0.04  # the source's outline pulled in by this fraction of its face size
SKIN_DISTANCE = 3.5  # Mahalanobis distance (Lab, lightness spread x LIGHTNESS_SLACK) still called skin
LIGHTNESS_SLACK = 2.0
TRIM = 3.0  # reference pixels past this many robust spreads are left out of the skin colour
DETAIL_FRAC = 0.01  # fine detail: lightness minus its blur at this fraction of the face size...
ENERGY_FRAC = 0.02  # ...averaged over this much...
TEXTURE_RATIO = 2.5  # ...above this many times the cheeks' median (plus TEXTURE_FLOOR, in L units) is hair
TEXTURE_FLOOR = 0.5
NOSE_SLACK = 2.0  # lids, nose and upper lip: this much further from the cheeks' chroma, any lightness
FACING_MIN = 0.25  # triangles seen more edge-on than this (cosine to the view axis) are not pasted
LID_GROW = 0.04  # the eyes grown by this fraction of the face size: lids and lashes, often shadowed
FEATURE_GROW = 0.015  # eyes, lips and brows grown by this fraction of the face size
CLEAN_FRAC = 0.015  # opening radius (specks)...
FILL_FRAC = 0.05  # ...closing radius: a shadow or a freckle inside the face is no hole to show the target
FEATHER_FRAC = 0.03  # blur sigma
FACE_OVAL = (
    10,
    338,
    297,
    332,
    284,
    251,
    389,
    356,
    454,
    323,
    361,
    288,
    397,
    365,
    379,
    378,
    400,
    377,
    152,
    148,
    176,
    149,
    150,
    136,
    172,
    58,
    132,
    93,
    234,
    127,
    162,
    21,
    54,
    103,
    67,
    109,
)
BROW_RIGHT = (70, 63, 105, 66, 107, 55, 65, 52, 53, 46)
BROW_LEFT = (300, 293, 334, 296, 336, 285, 295, 282, 283, 276)
# The cheeks below the eyes, beside the nose: where the source's own skin colour is read (the nose is redder
# than the rest, often as red as auburn hair, and the forehead is often under a fringe).
CHEEKS = (
    (117, 118, 119, 100, 142, 203, 206, 207, 187, 123),
    (346, 347, 348, 329, 371, 423, 426, 427, 411, 352),
)
NOSE = (168, 6, 197, 195, 5, 4, 1, 19, 94, 2, 98, 327, 129, 358, 48, 278, 115, 344, 220, 440)
RIDGE = (168, 6, 197, 195, 5, 4, 1)  # the nose's ridge, brow to tip


def _poly(points: np.ndarray, idx: tuple[int, ...]) -> np.ndarray:
    return np.round(points[list(idx)] * 16).astype(np.int32)


def _hull(points: np.ndarray, idx: tuple[int, ...]) -> np.ndarray:
    return np.round(cv2.convexHull(points[list(idx)].astype(np.float32)).reshape(-1, 2) * 16).astype(np.int32)


def disk(radius: int) -> np.ndarray:
    """An elliptic structuring element of `radius` px."""
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))


def inner_outline(hw: tuple[int, int], points: np.ndarray, size: float) -> tuple[np.ndarray, np.ndarray]:
    """(face, outline) (h, w) uint8 255 inside: the hull of the mesh's silhouette ring, and the same pulled
    in by OUTLINE_PULL of the face `size` (nothing outside it is ever valid)."""
    face = np.zeros(hw, np.uint8)
    cv2.fillConvexPoly(face, _hull(points, FACE_OVAL), 255, lineType=cv2.LINE_8, shift=4)
    return face, np.asarray(cv2.erode(face, disk(max(1, int(round(OUTLINE_PULL * size))))))


def facing_map(
    shape: tuple[int, int], landmarks: np.ndarray, depth: np.ndarray, triangles: np.ndarray
) -> np.ndarray:
    """(H, W) uint8: 0 on the mesh's triangles whose three corners all face away from the camera past
    FACING_MIN (the cosine of the surface normal with the view axis: area-weighted vertex normals from the
    mesh's depth, so a thin triangle between the lips is no surface of its own), 255 elsewhere. A turned
    source's far cheek is seen edge-on: warped onto a frontal face its few pixels smear into streaks, or
    show the wall behind."""
    pts = np.column_stack([landmarks.astype(np.float64), depth.astype(np.float64)])
    idx = np.asarray(triangles)
    tri = pts[idx]
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    normal *= np.sign(normal[:, 2:3] + 1e-12)  # one side (the 2-D winding is not the surface's)
    vertex = np.zeros_like(pts)
    for k in range(3):
        np.add.at(vertex, idx[:, k], normal)
    facing = np.abs(vertex[:, 2]) / np.maximum(np.linalg.norm(vertex, axis=1), 1e-12)
    out = np.full(shape, 255, np.uint8)
    away = [np.round(t[:, :2] * 16).astype(np.int32) for t in tri[facing[idx].max(1) < FACING_MIN]]
    if away:
        cv2.fillPoly(out, away, 0, lineType=cv2.LINE_8, shift=4)
    return out


def validity_map(
    image: np.ndarray,
    landmarks: np.ndarray,
    depth: np.ndarray | None = None,
    triangles: np.ndarray | None = None,
    ridge: bool = False,
) -> np.ndarray:
    """(H, W) uint8, 255 where the source's pixel may be pasted (see the module docstring); with the mesh's
    `depth` and `triangles`, not where the face is seen edge-on (`facing_map`); with `ridge` (a turned
    source, whose nose's ridge is its outline there), not within the outline's pull of the ridge either."""
    h, w = image.shape[:2]
    pts = landmarks.astype(np.float64)
    size = float(max(np.ptp(pts[:, 0]), np.ptp(pts[:, 1]), 1.0))
    face, outline = inner_outline((h, w), pts, size)
    pull = max(1, int(round(OUTLINE_PULL * size)))

    features = np.zeros((h, w), np.uint8)
    cv2.fillPoly(features, [_poly(pts, EYE_RIGHT), _poly(pts, EYE_LEFT)], 255, lineType=cv2.LINE_8, shift=4)
    # eyes with lids and lashes (often shadowed), nose and upper lip (redder than the cheeks): a looser test
    # (a turned source's far eye may open onto the wall behind the nose)
    nose = np.asarray(cv2.dilate(features, disk(max(1, int(round(LID_GROW * size))))))
    features[:] = 0
    cv2.fillPoly(features, [_poly(pts, OUTER_LIPS)], 255, lineType=cv2.LINE_8, shift=4)
    for brow in (BROW_RIGHT, BROW_LEFT):
        cv2.fillConvexPoly(features, _hull(pts, brow), 255, lineType=cv2.LINE_8, shift=4)
    features = np.asarray(cv2.dilate(features, disk(max(1, int(round(FEATURE_GROW * size))))))

    patch = np.zeros((h, w), np.uint8)
    for cheek in CHEEKS:
        cv2.fillConvexPoly(patch, _hull(pts, cheek), 255, lineType=cv2.LINE_8, shift=4)
    facing = None if depth is None or triangles is None else facing_map((h, w), pts, depth, triangles)
    reference = (patch > 0) & (features == 0)
    if facing is not None:
        facing = np.asarray(cv2.erode(facing, disk(max(1, int(round(OUTLINE_PULL * size))))))
        if int((reference & (facing > 0)).sum()) >= 16:  # a turned source's far cheek may be the wall
            reference &= facing > 0
    cv2.fillConvexPoly(nose, _hull(pts, NOSE + OUTER_LIPS), 255, lineType=cv2.LINE_8, shift=4)
    skin = np.ones((h, w), bool)
    near_skin = np.ones((h, w), bool)
    smooth = np.ones((h, w), bool)
    ys, xs = np.nonzero(outline)
    if int(reference.sum()) >= 16 and ys.size:
        bx0, by0, bx1, by1 = int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1
        lab = cv2.cvtColor(
            np.multiply(image[by0:by1, bx0:bx1], np.float32(1.0 / 255.0), dtype=np.float32), cv2.COLOR_RGB2LAB
        )
        ref = reference[by0:by1, bx0:bx1]
        px = lab[ref].astype(np.float64)
        flat = lab.reshape(-1, 3).astype(np.float64)
        # robust first (median, MAD: a strand of hair or a sticker on a cheek is no part of its colour), then
        # the colour's mean and covariance on what the first estimate calls skin
        centre = np.median(px, axis=0)
        spread = 1.4826 * np.median(np.abs(px - centre), axis=0) + np.array([2.0, 1.0, 1.0])
        keep = (np.abs(px - centre) <= TRIM * spread).all(1)
        if int(keep.sum()) < 16:
            keep[:] = True
        mean = px[keep].mean(0)
        cov = np.cov(px[keep].T) + np.diag([4.0, 1.0, 1.0])  # a floor: an evenly lit patch is not all skin
        cov[0, :] *= LIGHTNESS_SLACK
        cov[:, 0] *= LIGHTNESS_SLACK
        inv = np.linalg.inv(cov)
        d = flat - mean
        dist2 = np.einsum("ni,ij,nj->n", d, inv, d).reshape(by1 - by0, bx1 - bx0)
        # hair is skin-coloured often enough: it is told by its strands, fine detail the cheeks lack
        light = np.ascontiguousarray(lab[:, :, 0])
        fine = np.abs(light - cv2.GaussianBlur(light, (0, 0), max(0.8, DETAIL_FRAC * size)))
        energy = cv2.GaussianBlur(fine, (0, 0), max(1.0, ENERGY_FRAC * size))
        limit = TEXTURE_RATIO * float(np.median(energy[ref][keep])) + TEXTURE_FLOOR
        smooth[by0:by1, bx0:bx1] = energy <= limit
        skin[by0:by1, bx0:bx1] = (dist2 <= SKIN_DISTANCE**2) & smooth[by0:by1, bx0:bx1]
        # near skin: the colour alone (a, b), however dark (a shadowed lid, a nostril) or red (the nose)
        chroma = d[:, 1:] @ np.linalg.inv(cov[1:, 1:])
        near = (chroma * d[:, 1:]).sum(1).reshape(by1 - by0, bx1 - bx0)
        near_skin[by0:by1, bx0:bx1] = near <= (NOSE_SLACK * SKIN_DISTANCE) ** 2
    valid = np.where(skin & (outline > 0), np.uint8(255), np.uint8(0))
    r = max(1, int(round(CLEAN_FRAC * size)))
    valid = np.asarray(cv2.morphologyEx(valid, cv2.MORPH_OPEN, disk(r)))
    valid = np.asarray(cv2.morphologyEx(valid, cv2.MORPH_CLOSE, disk(max(1, int(round(FILL_FRAC * size))))))
    valid &= outline
    # what the closing filled: a shadow or a freckle, not the wall in a notch nor strands of hair across a
    # cheek (as skin-coloured as the cheek, told by their detail)
    valid[~(near_skin & smooth)] = 0
    features[(nose > 0) & near_skin] = 255  # not the wall past a turned nose or a far eye
    valid = np.maximum(valid, features & face)
    if facing is not None:
        valid = np.minimum(valid, facing)
    if ridge:
        line = np.round(pts[list(RIDGE)] * 16).astype(np.int32)
        cv2.polylines(valid, [line], False, 0, thickness=2 * pull + 1, lineType=cv2.LINE_8, shift=4)
    sigma = max(0.5, FEATHER_FRAC * size)
    return np.asarray(cv2.GaussianBlur(valid, (0, 0), sigma), dtype=np.uint8)


def fill_outside(image: np.ndarray, validity: np.ndarray) -> np.ndarray:
    """`image` with every pixel outside the valid region (validity under half) that the feathered edge still
    pastes in part replaced by the colour of the valid pixels near it (normalised convolution).

    Why: the feather's outer half lies on the pixels the map refused, so a strand of hair along a cheek or
    the wall past it would show at a quarter or a tenth of its strength as a dark or light line along the
    face's edge. Filled, the edge fades into the source's own skin. Done once per source, on the box around
    that edge; the valid pixels themselves are untouched."""
    inside = validity >= 128
    edge = (validity > 0) & ~inside
    if not edge.any() or not inside.any():
        return image
    ys, xs = np.nonzero(validity)
    size = float(max(int(np.ptp(xs)), int(np.ptp(ys)), 1))
    sigma = max(1.0, FEATHER_FRAC * size)
    pad = int(np.ceil(3 * sigma)) + 1
    h, w = validity.shape
    y0, y1 = max(int(ys.min()) - pad, 0), min(int(ys.max()) + pad + 1, h)
    x0, x1 = max(int(xs.min()) - pad, 0), min(int(xs.max()) + pad + 1, w)
    weight = inside[y0:y1, x0:x1].astype(np.float32)
    crop = image[y0:y1, x0:x1].astype(np.float32)
    total = cv2.GaussianBlur(weight, (0, 0), 2 * sigma)
    colour = (
        cv2.GaussianBlur(crop * weight[:, :, None], (0, 0), 2 * sigma) / np.maximum(total, 1e-6)[:, :, None]
    )
    out = np.array(image, copy=True)
    ring = edge[y0:y1, x0:x1] & (total > 1e-3)
    out[y0:y1, x0:x1][ring] = np.clip(np.round(colour[ring]), 0, 255).astype(np.uint8)
    return out
