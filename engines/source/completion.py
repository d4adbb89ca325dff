"""A frontal source's skin hidden under its hair, completed from the same place on the other side of its face.

Why: long hair often falls across one cheek. The validity map refuses it, so that strip of the target's
face stays the target's own skin beside the source's, and where the two meet (the source's skin shaded by
the hair and tinted by its edge) the colour match draws a brown line down the target's cheek. A face is
close to symmetric: each refused pixel is read at its mirror image (every mesh triangle mapped onto the
triangle of its corners' mirror points, `face_mirror.MIRROR`, so the map is continuous across the mesh),
where that one is valid, with its own side's shading (the two sides' low-pass colour ratio where both are
seen, carried over by normalised convolution), feathered into its surroundings: a pixel valid on its own
side is untouched (but for the strand's tinted rim), one refused on both sides stays refused, the eyes,
brows and lips are never mirrored. Done once per source, at upload.
"""

from __future__ import annotations

import cv2
import numpy as np

from engines.processors.masks import EYE_LEFT, EYE_RIGHT, OUTER_LIPS
from engines.source.mirror import mirror_index
from engines.source.validity import BROW_LEFT, BROW_RIGHT, FEATHER_FRAC, disk, inner_outline

SHADE_FRAC = 0.08  # the shading ratio is read at this fraction of the face size (a low-pass, not detail)
SHADE_RANGE = (0.6, 1.6)  # and kept within this range per channel
EYE_GROW = 0.11  # nothing within this fraction of the face size of an eye is mirrored (lids, lashes)
RIM_FRAC = 0.025  # valid pixels this close to a refused one are read at their mirror too (the strand's tint)


def mirror_map(
    points: np.ndarray, triangles: np.ndarray, hw: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(map_x, map_y, covered) over an (h, w) image: for each pixel inside the mesh `points` (468, 2) the
    position of its mirror image (piecewise affine over `triangles`); -1 and False outside the mesh."""
    h, w = hw
    pts = np.asarray(points, dtype=np.float64)
    tris = np.asarray(triangles, dtype=np.int64)
    dst, src = pts[tris], pts[mirror_index()[tris]]
    system = np.concatenate([dst, np.ones((*dst.shape[:2], 1))], axis=2)
    usable = np.abs(np.linalg.det(system)) > 1e-6
    ids = np.zeros((h, w), np.int32)
    fixed = np.round(dst * 16).astype(np.int32)
    for t in np.nonzero(usable)[0]:
        cv2.fillConvexPoly(ids, fixed[t], int(t) + 1, lineType=cv2.LINE_8, shift=4)
    affine = np.zeros((len(tris), 3, 2))
    affine[usable] = np.linalg.solve(system[usable], src[usable])
    ys, xs = np.nonzero(ids)
    m = affine[ids[ys, xs] - 1]
    map_x = np.full((h, w), -1.0, np.float32)
    map_y = np.full((h, w), -1.0, np.float32)
    map_x[ys, xs] = xs * m[:, 0, 0] + ys * m[:, 1, 0] + m[:, 2, 0]
    map_y[ys, xs] = xs * m[:, 0, 1] + ys * m[:, 1, 1] + m[:, 2, 1]
    return map_x, map_y, ids > 0


def _fill(mask: np.ndarray, points: np.ndarray, idx: tuple[int, ...], value: int = 255) -> None:
    hull = cv2.convexHull(points[list(idx)].astype(np.float32)).reshape(-1, 2)
    cv2.fillConvexPoly(mask, np.round(hull * 16).astype(np.int32), value, lineType=cv2.LINE_8, shift=4)


def completed(
    image: np.ndarray, validity: np.ndarray, points: np.ndarray, triangles: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(image, validity) with the refused pixels inside the face read at their valid mirror images (see the
    module docstring). `image` (H, W, 3) uint8, `validity` (H, W) uint8 0..255 as `validity_map` gives.
    Inside the face: the source's outline pulled in as the validity map pulls it. The valid pixels within
    `RIM_FRAC` of a completed one are read at their mirror too (they carry the strand's tint); the eyes with
    `EYE_GROW` around them, the brows and the lips never are (a mirrored eye looks the other way, and a
    mirrored lid moves the eye's outline: the clip's blinks were read less well)."""
    h, w = validity.shape
    pts = np.asarray(points, dtype=np.float64)
    size = float(max(np.ptp(pts[:, 0]), np.ptp(pts[:, 1]), 1.0))
    _, face = inner_outline((h, w), pts, size)
    map_x, map_y, covered = mirror_map(pts, triangles, (h, w))
    seen = cv2.remap(validity, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    mirror_valid = np.where(covered, seen, 0).astype(np.uint8)
    drawn = np.zeros((h, w), np.uint8)
    for eye in (EYE_LEFT, EYE_RIGHT):
        _fill(drawn, pts, eye)
    eyes = np.asarray(cv2.dilate(drawn, disk(max(1, int(round(EYE_GROW * size))))))  # lids and lashes
    holes = ((validity < 128) & (mirror_valid >= 128) & (face > 0) & (eyes == 0)).view(np.uint8)
    if not holes.any():
        return image, validity
    features = eyes.copy()
    for part in (BROW_LEFT, BROW_RIGHT, OUTER_LIPS):
        _fill(features, pts, part)
    rim = max(1, int(round(RIM_FRAC * size)))
    reach = cv2.dilate(holes, disk(rim)).astype(np.float32)
    reach[features > 0] = 0.0
    # the share read at the mirror: 1 on the holes and their rim, feathered, never more than the mirror
    # image is valid
    weight = cv2.GaussianBlur(reach, (0, 0), max(0.5, rim / 2.0)) * (mirror_valid.astype(np.float32) / 255.0)
    weight = np.maximum(weight, holes * (mirror_valid.astype(np.float32) / 255.0))
    mirrored = cv2.remap(image, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    sigma = max(1.0, SHADE_FRAC * size)
    both = ((validity.astype(np.float32) / 255.0) * (mirror_valid.astype(np.float32) / 255.0))[:, :, None]
    ownside = cv2.GaussianBlur(image.astype(np.float32) * both, (0, 0), sigma)
    otherside = cv2.GaussianBlur(mirrored.astype(np.float32) * both, (0, 0), sigma)
    ratio = np.clip(ownside / np.maximum(otherside, 1e-3), *SHADE_RANGE)
    ratio[otherside < 1e-2] = 1.0  # nowhere near a place both sides are seen: as it is
    wt = weight[:, :, None]
    out = image.astype(np.float32) * (1.0 - wt) + mirrored.astype(np.float32) * ratio * wt
    # valid: the holes with what was valid, feathered as the validity map feathers its own edge, never
    # more than the mirror image is valid, and only around the holes (elsewhere the map stays as it was)
    feather = max(0.5, FEATHER_FRAC * size)
    union = np.where((validity >= 128) | (holes > 0), np.uint8(255), np.uint8(0))
    grown = np.minimum(cv2.GaussianBlur(union, (0, 0), feather), mirror_valid)
    near = cv2.dilate(holes, disk(int(np.ceil(3 * feather)))) > 0
    new_valid = np.where(near, np.maximum(validity, grown), validity)
    return np.clip(np.round(out), 0, 255).astype(np.uint8), new_valid
