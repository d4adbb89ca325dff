"""Small mask functions the swappers and enhancers compose: target regions kept, crop box masks.

Regions kept from the target (FaceFusion's mask regions, Deep-Live-Cam's mouth mask): `mouth`, the inner-lip
ring grown a little onto the lips, so a talking target keeps its mouth under a closed-mouth source and a
smile its teeth; `eyes`, the eye openings only (gaze), so lids and eye shape stay the source's; `eye_area`,
the openings grown over lids and lashes, which hands much of the identity back to the target. A closed ring
has no area: the source's lips or lids show.
Box masks for aligned crops (FaceFusion's `create_static_box_mask`) depend only on crop size and settings, so
each swapper/enhancer builds its own once. An aligned crop reaches past the face at its sides, so the paste
mask is that box mask times the face's grown box (`face_region_mask`): nothing far from the face is touched.
`skin_weight`: the face off its lips, eyes and brows, where skin's colour and light are read.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from engines.processors.alignment import transform_points

# MediaPipe FaceMesh contours (FACEMESH_LIPS inner ring, FACEMESH_LEFT_EYE / RIGHT_EYE, FACEMESH_LIPS outer).
INNER_LIPS = (78, 95, 88, 178, 87, 14, 317, 402, 318, 324, 308, 415, 310, 311, 312, 13, 82, 81, 80, 191)
OUTER_LIPS = (61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291, 409, 270, 269, 267, 0, 37, 39, 40, 185)
EYE_RIGHT = (33, 7, 163, 144, 145, 153, 154, 155, 133, 173, 157, 158, 159, 160, 161, 246)  # image left
EYE_LEFT = (263, 249, 390, 373, 374, 380, 381, 382, 362, 398, 384, 385, 386, 387, 388, 466)  # image right
REGION_RINGS: dict[str, tuple[tuple[int, ...], ...]] = {
    "mouth": (INNER_LIPS,),
    "eyes": (EYE_RIGHT, EYE_LEFT),
    "eye_area": (EYE_RIGHT, EYE_LEFT),
}
# FaceMesh's brows: upper edge, then the lower edge back (one closed ring per brow)
BROW_RIGHT = (70, 63, 105, 66, 107, 55, 65, 52, 53, 46)  # image left
BROW_LEFT = (336, 296, 334, 293, 300, 276, 283, 282, 295, 285)  # image right
FEATURES = (OUTER_LIPS, EYE_RIGHT, EYE_LEFT, BROW_RIGHT, BROW_LEFT)
FEATURE_GROW = 0.03  # skin_weight: the features grown by this fraction of the face size, then left out
# Grow each kept region by this fraction of the face size (negative: pull it in) and feather it by this much.
# Chosen with the quality report's identity, liveliness, teeth and seam measures: the mouth's inner-lip ring
# grows by 2.5 feathers, so the whole opening is at full strength (FaceMesh draws a smile's inner lips over
# the edge of its teeth) and the feather falls outward onto the lips (a feather centred on the ring laid the
# source's lips over the target's teeth); further out the lips are the source's (identity; the opening's own
# outline is the target's, see face_expression.INNER_HOLD). The eyes stay inside the lids, feathered about
# as wide as a lid's margin, so a kept iris is at full strength and the lid line blends into the source's
# lids (pulled in further they keep less gaze for a little identity; a sharper edge shows as a seam).
GROW = {"mouth": 0.015, "eyes": -0.004, "eye_area": 0.025}
FEATHER = {"mouth": 0.006, "eyes": 0.009, "eye_area": 0.012}
# The mouth grows in full only once it shows its teeth: below an opening (the inner lips' gap over their
# corners' distance) of MOUTH_OPEN[0] it keeps MOUTH_CLOSED_GROW of its grow, from MOUTH_OPEN[1] all of it
# (linear between). A closed or talking mouth's grow would only hand the target's lips (identity) back.
MOUTH_OPEN = (0.08, 0.15)
MOUTH_CLOSED_GROW = 0.4
MOUTH_GAPS = ((13, 14), (82, 87), (312, 317))  # inner upper / lower lip
MOUTH_CORNERS = (78, 308)  # the inner lips' corners


def face_size_of(landmarks: np.ndarray) -> float:
    return float(np.ptp(landmarks, axis=0).max())


def skin_weight(shape: tuple[int, int], landmarks: np.ndarray, face_size: float) -> np.ndarray:
    """(h, w) bool: True off the lips, eyes and brows (grown), where skin's colour is read."""
    h, w = shape
    out = np.zeros((h, w), np.uint8)
    polys = [np.round(landmarks[list(r)] * 16).astype(np.int32) for r in FEATURES]
    cv2.fillPoly(out, polys, 255, lineType=cv2.LINE_8, shift=4)
    grow = max(1, int(round(face_size * FEATURE_GROW)))
    grown = cv2.dilate(out, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1,) * 2))
    return np.asarray(grown) == 0


def mouth_opening(landmarks: np.ndarray) -> float:
    """The inner lips' mean gap over their corners' distance (0: closed)."""
    pts = np.asarray(landmarks, dtype=np.float64)
    gaps = [float(np.hypot(*(pts[a] - pts[b]))) for a, b in MOUTH_GAPS]
    width = float(np.hypot(*(pts[MOUTH_CORNERS[0]] - pts[MOUTH_CORNERS[1]])))
    return sum(gaps) / len(gaps) / max(width, 1e-6)


def region_grow(landmarks: np.ndarray, region: str, face_size: float) -> int:
    """How far (px, negative: pulled in) a kept `region` grows: GROW of the face size, the mouth's by its
    opening (MOUTH_OPEN)."""
    frac = GROW[region]
    if region == "mouth":
        lo, hi = MOUTH_OPEN
        t = min(max((mouth_opening(landmarks) - lo) / (hi - lo), 0.0), 1.0)
        frac *= MOUTH_CLOSED_GROW + (1.0 - MOUTH_CLOSED_GROW) * t
    return int(round(face_size * frac))


def region_rings(landmarks: np.ndarray, region: str) -> list[np.ndarray]:
    """The polygons (float, (n, 2) each) a kept `region` fills before it is grown."""
    pts = np.asarray(landmarks, dtype=np.float64)
    return [pts[list(r)] for r in REGION_RINGS[region]]


def region_mask(
    shape: tuple[int, int], landmarks: np.ndarray, regions: tuple[str, ...], face_size: float
) -> np.ndarray:
    """Float mask in [0, 1] (h, w): 1 where the target's `regions` are kept. `landmarks` in the mask's
    coordinates (468, 2). Each region is grown and blurred inside its own bounding box only."""
    h, w = shape
    out = np.zeros((h, w), dtype=np.float32)
    for region in regions:
        polys = [np.round(r * 16).astype(np.int32) for r in region_rings(landmarks, region)]
        grow = region_grow(landmarks, region, face_size)
        sigma = max(0.5, face_size * FEATHER[region])
        pad = max(grow, 0) + int(np.ceil(3 * sigma)) + 1
        pts = np.concatenate(polys) >> 4
        x0, y0 = max(int(pts[:, 0].min()) - pad, 0), max(int(pts[:, 1].min()) - pad, 0)
        x1, y1 = min(int(pts[:, 0].max()) + pad + 1, w), min(int(pts[:, 1].max()) + pad + 1, h)
        if x1 <= x0 or y1 <= y0:
            continue
        filled = np.zeros((y1 - y0, x1 - x0), dtype=np.uint8)
        cv2.fillPoly(filled, [q - (x0 * 16, y0 * 16) for q in polys], 255, lineType=cv2.LINE_8, shift=4)
        if grow != 0:
            kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * abs(grow) + 1,) * 2)
            filled = np.asarray((cv2.dilate if grow > 0 else cv2.erode)(filled, kernel), np.uint8)
        if not filled.any():
            continue
        soft = cv2.GaussianBlur(filled.astype(np.float32) * (1.0 / 255.0), (0, 0), sigma)
        np.maximum(out[y0:y1, x0:x1], soft, out=out[y0:y1, x0:x1])
    return out


@dataclass(frozen=True)
class BoxMaskConfig:
    """FaceFusion's box mask: `blur` as a fraction of half the crop, `padding` (top, right, bottom, left) in
    percent of the crop."""

    blur: float = 0.3
    padding: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        if not 0.0 <= self.blur <= 1.0:
            raise ValueError(f"mask blur must be in 0..1, got {self.blur}")
        if len(self.padding) != 4 or any(not 0.0 <= p < 50.0 for p in self.padding):
            raise ValueError(
                f"mask padding must be 4 percentages (top, right, bottom, left) in 0..50, got {self.padding}"
            )


def box_mask(size: int, config: BoxMaskConfig) -> np.ndarray:
    """The (size, size) float32 box mask (read-only: callers build it once and share it across faces)."""
    blur_amount = int(size * 0.5 * config.blur)
    blur_area = max(blur_amount // 2, 1)
    top, right, bottom, left = (max(blur_area, int(size * p / 100.0)) for p in config.padding)
    mask = np.ones((size, size), dtype=np.float32)
    mask[:top, :] = 0.0
    mask[size - bottom :, :] = 0.0
    mask[:, :left] = 0.0
    mask[:, size - right :] = 0.0
    if blur_amount > 0:
        mask = np.asarray(cv2.GaussianBlur(mask, (0, 0), blur_amount * 0.25), dtype=np.float32)
    mask.setflags(write=False)
    return mask


REGION_GROW = 0.1  # the face's box grown by this fraction of its size per side (soft edge included)...
REGION_BLUR = 0.02  # ...softened by this much of the crop, inwards from there (the box stays at full)


def face_region_mask(box: np.ndarray, matrix: np.ndarray, size: int) -> np.ndarray:
    """The face's frame box, grown by `REGION_GROW` and softly edged, seen in an aligned `size` crop.

    Multiplied into the box mask it keeps the promise that only the face's region is touched (an aligned crop
    reaches past the face at its sides) while the face itself stays at full strength. Drawn at most 128 px
    wide and resized: the 512 GFPGAN crop must not pay a 512 blur per face.
    """
    out = face_region_work_mask(box, matrix, size)
    if out.shape[0] != size:
        out = np.asarray(cv2.resize(out, (size, size), interpolation=cv2.INTER_LINEAR), dtype=np.float32)
    return out


def face_region_work_mask(box: np.ndarray, matrix: np.ndarray, size: int) -> np.ndarray:
    """`face_region_mask` before its resize to `size` (at most 128 px wide): the device path uploads this
    and resizes there."""
    w, h = float(box[2] - box[0]), float(box[3] - box[1])
    g = REGION_GROW
    x0, y0, x1, y1 = box[0] - g * w, box[1] - g * h, box[2] + g * w, box[3] + g * h
    corners = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)
    work = min(size, 128)
    poly = transform_points(corners, matrix) * (work / size)
    filled = np.zeros((work, work), dtype=np.float32)
    cv2.fillConvexPoly(filled, np.round(poly * 16).astype(np.int32), 1.0, lineType=cv2.LINE_8, shift=4)
    sigma = max(0.5, work * REGION_BLUR)
    pull = int(round(2.0 * sigma))
    if pull > 0:  # pull the edge in by 2 sigma, then blur: the box itself stays at full strength
        filled = np.asarray(cv2.erode(filled, cv2.getStructuringElement(cv2.MORPH_RECT, (2 * pull + 1,) * 2)))
    return np.asarray(cv2.GaussianBlur(filled, (0, 0), sigma), dtype=np.float32)


def paste_mask(box: np.ndarray, matrix: np.ndarray, base: np.ndarray) -> np.ndarray:
    """An aligned crop's paste mask: `base` (the crop's `box_mask`), limited to the face's (grown) region."""
    return base * face_region_mask(box, matrix, base.shape[0])


def full_strength_share(mask: np.ndarray, level: float = 0.99) -> float:
    """Share of the mask's pixels at (near) full strength."""
    return float((mask >= level).mean())
