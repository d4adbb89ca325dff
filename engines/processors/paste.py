"""Paste processed faces back into the frame: only the face's region is touched, edges are feathered.

A processor hands back a `FacePatch`: an image in its own crop space, an alpha mask there, and the affine
that maps frame -> crop. Pasting warps both back (or just offsets them, for patches made in frame space),
and blends `frame = frame * (1 - a) + patch * a` over the bounding box of the patch's footprint only.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from engines.processors.alignment import invert_affine


@dataclass(frozen=True)
class FacePatch:
    image: np.ndarray  # (h, w, 3) float32 RGB 0..255, crop space (uint8 for an opaque patch)
    mask: np.ndarray  # (h, w) float32 0..1, crop space; already includes any blend factor
    matrix: np.ndarray  # (2, 3) frame -> crop
    opaque: bool = False  # the patch replaces its whole box (mask all ones): an integer shift is a copy


def translation(x0: int, y0: int) -> np.ndarray:
    """The frame -> crop affine of a patch cut out of the frame at (x0, y0)."""
    return np.array([[1.0, 0.0, -x0], [0.0, 1.0, -y0]], dtype=np.float32)


def feathered_polygon_mask(h: int, w: int, polygon: np.ndarray, erode: int, blur: float) -> np.ndarray:
    """A filled convex polygon, pulled in by `erode` px and blurred, so the seam fades out inside the face."""
    filled = np.zeros((h, w), dtype=np.uint8)
    cv2.fillConvexPoly(filled, np.round(polygon * 16).astype(np.int32), 255, lineType=cv2.LINE_8, shift=4)
    return feather(filled, erode, blur)


SEAM_WIDEN = 2.0  # where the pasted face and the target differ most, the feather is this many times wider...
SEAM_DIFF = 30.0  # ...from this mean channel difference across the boundary (grey levels) up
SEAM_STEP = 4  # the wide feather and the difference's weight are drawn on every 4th pixel (both are smooth)


def seam_feather(
    narrow: np.ndarray, hull: np.ndarray, erode: int, image: np.ndarray, roi: np.ndarray, blur: float
) -> np.ndarray:
    """The paste's edge: `narrow` (the hull pulled in by `erode`, blurred by `blur`) where the pasted face
    and the target agree; where they differ by `SEAM_DIFF` or more (the mean channel difference, smoothed by
    `blur`), the same hull pulled in and blurred `SEAM_WIDEN` times as far; mixed in between. A colour step
    across the boundary is spread over a wider band, so the gradient there stays near the target's own, and
    where nothing steps the source keeps its edge. The wide feather and the weight are smooth, so they are
    drawn on every `SEAM_STEP`th pixel and the change is stretched back (bilinear)."""
    h, w = narrow.shape
    step = SEAM_STEP
    face = image[::step, ::step].astype(np.float32)
    diff = np.abs(face - roi[::step, ::step]).mean(axis=2).astype(np.float32)
    gh, gw = diff.shape
    weight = cv2.GaussianBlur(diff, (0, 0), max(0.3, blur / step)) * np.float32(1.0 / SEAM_DIFF)
    wide = feathered_polygon_mask(
        gh, gw, hull / step, erode=int(round(erode * SEAM_WIDEN / step)), blur=blur * SEAM_WIDEN / step
    )
    change = np.asarray((wide - narrow[::step, ::step]) * np.clip(weight, 0.0, 1.0), dtype=np.float32)
    out = np.asarray(cv2.resize(change, (w, h), interpolation=cv2.INTER_LINEAR), dtype=np.float32)
    out += narrow
    return np.clip(out, 0.0, 1.0, out=out)


def feather(region: np.ndarray, erode: int, blur: float) -> np.ndarray:
    """A 0/255 (or boolean) region, pulled in by `erode` px and blurred: a float mask in [0, 1]."""
    mask = region.astype(np.uint8) * 255 if region.dtype == bool else region
    if erode > 0:
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * erode + 1, 2 * erode + 1))
        mask = np.asarray(cv2.erode(mask, kernel), dtype=np.uint8)
    out = mask.astype(np.float32) * (1.0 / 255.0)
    return cv2.GaussianBlur(out, (0, 0), blur) if blur > 0 else out


def fade_in(region: np.ndarray, erode: int) -> np.ndarray:
    """A boolean region's inside, 0 on its edge and outside, rising smoothly to 1 about 2 `erode` px in
    (at least 2): the region pulled in by that and blurred by a third of it, so the blur's tail stays inside
    (a wider feather cut by the region itself shows a step where its edge is ragged: the culled triangles
    of a turned face)."""
    pull = max(erode, 2)
    return feather(region, pull, pull / 3.0)


def face_box_mask(box: np.ndarray, matrix: np.ndarray, size: int, feather: float) -> np.ndarray:
    """The face's frame box, seen in an aligned `size` crop, feathered inwards by `feather` of the box size.

    Aligned crops (inswapper 128, GFPGAN 512) reach well past the face; masking them to the detector's box
    keeps every change inside the face's box, as the gateway promises.
    """
    corners = np.array([[box[0], box[1]], [box[2], box[1]], [box[2], box[3]], [box[0], box[3]]], np.float32)
    poly = corners @ matrix[:, :2].T + matrix[:, 2]
    side = float(np.sqrt(max(cv2.contourArea(poly.astype(np.float32)), 1.0)))
    sigma = max(0.5, side * feather / 3.0)
    return feathered_polygon_mask(size, size, poly, erode=int(np.ceil(3 * sigma)) + 1, blur=sigma)


def _is_integer_translation(m: np.ndarray) -> bool:
    """np.allclose(m[:, :2], eye) and np.allclose(m[:, 2], round(m[:, 2])), on six Python floats: the numpy
    calls cost more than the blend of a small face."""
    a, b, tx, c, d, ty = (float(v) for v in m.ravel())

    def close(x: float, y: float) -> bool:
        return abs(x - y) <= 1e-8 + 1e-5 * abs(y)

    return (
        close(a, 1.0)
        and close(b, 0.0)
        and close(c, 0.0)
        and close(d, 1.0)
        and close(tx, round(tx))
        and close(ty, round(ty))
    )


def paste_back(frame: np.ndarray, patch: FacePatch) -> tuple[int, int, int, int] | None:
    """Blend `patch` into `frame` (uint8 RGB, modified in place); returns the touched x0, y0, x1, y1."""
    fh, fw = frame.shape[:2]
    ph, pw = patch.mask.shape
    inv = invert_affine(patch.matrix)
    corners = np.array([[0, 0], [pw, 0], [0, ph], [pw, ph]], dtype=np.float32) @ inv[:, :2].T + inv[:, 2]
    x0, y0 = np.floor(corners.min(0)).astype(int)
    x1, y1 = np.ceil(corners.max(0)).astype(int)
    x0, y0, x1, y1 = max(int(x0), 0), max(int(y0), 0), min(int(x1), fw), min(int(y1), fh)
    if x1 <= x0 or y1 <= y0:
        return None
    if _is_integer_translation(patch.matrix):
        ox, oy = -int(round(float(patch.matrix[0, 2]))), -int(round(float(patch.matrix[1, 2])))
        image = patch.image[y0 - oy : y1 - oy, x0 - ox : x1 - ox]
        if patch.opaque and image.dtype == np.uint8:
            frame[y0:y1, x0:x1] = image
            return x0, y0, x1, y1
        alpha = patch.mask[y0 - oy : y1 - oy, x0 - ox : x1 - ox]
    else:
        # crop -> region: the inverse affine, shifted so the region's corner is the origin.
        to_region = inv.copy()
        to_region[:, 2] -= (x0, y0)
        size = (x1 - x0, y1 - y0)
        image = cv2.warpAffine(
            patch.image, to_region, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )
        alpha = cv2.warpAffine(
            patch.mask,
            to_region,
            size,
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=0.0,
        )
    region = frame[y0:y1, x0:x1]
    a = np.clip(alpha, 0.0, 1.0)
    # region + (image - region) * a, rounded: the same blend in fewer full-size temporaries; the mask is
    # spread to three channels first (numpy broadcasting a trailing axis of 1 costs ten times as much).
    r = region.astype(np.float32)
    blended = np.subtract(image, r, dtype=np.float32)
    blended *= cv2.merge((a, a, a))
    blended += r
    blended += np.float32(0.5)
    np.clip(blended, 0.5, 255.5, out=blended)
    region[:] = blended  # truncates: round half up, as before
    return x0, y0, x1, y1
