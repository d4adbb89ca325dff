"""The kept mouth in the source's lip colour, per face (host; the torch twin is in device_mesh_warp).

Why: the target's mouth is kept (its opening, teeth and the lips' inner rim: the expression), so its lips
showed the target's own colour inside the source's pasted lips: two-tone lips, a step along the kept
region's edge, and a cue that hands the face back to the target (a face embedder reads lip colour). The kept
mouth keeps the target's detail and takes, on the lips (not the opening), the difference between the relit
source face and the target low-passed over the lips ring alone: the source's lip colour and light there.
Teeth, tongue and the opening's dark stay the target's pixels exactly.
"""

from __future__ import annotations

import cv2
import numpy as np

from engines.processors.masks import INNER_LIPS, OUTER_LIPS, region_mask
from engines.processors.mouth_hold import ring_fill

SIGMA = 0.03  # the difference's low-pass over the lips ring, a fraction of the face size
OPENING_FEATHER = 0.004  # the tint fades out across the lips' edges over this fraction of the face size
SUPPORT = 0.05  # below this share of lip pixels under the low-pass the tint fades (far from the lips)
LIGHTNESS = 1.0  # how much of the lips' difference in lightness (Rec. 601 luma) goes with their colour
LUMA = (0.299, 0.587, 0.114)


def lips_box(local: np.ndarray, face_size: float, hw: tuple[int, int]) -> tuple[int, int, int, int] | None:
    """The outer lips' box grown by the low-pass's reach, inside (h, w); None when under 4 px a side."""
    h, w = hw
    outer = np.asarray(local, dtype=np.float64)[list(OUTER_LIPS)]
    pad = int(np.ceil(3.0 * max(1.0, face_size * SIGMA))) + 2
    x0, y0 = max(int(np.floor(outer[:, 0].min())) - pad, 0), max(int(np.floor(outer[:, 1].min())) - pad, 0)
    x1, y1 = (
        min(int(np.ceil(outer[:, 0].max())) + pad + 1, w),
        min(int(np.ceil(outer[:, 1].max())) + pad + 1, h),
    )
    if x1 - x0 < 4 or y1 - y0 < 4:
        return None
    return x0, y0, x1, y1


def fill(h: int, w: int, ring: np.ndarray) -> np.ndarray:
    """(h, w) float32 {0, 1}: the pixel centres inside the ring (mouth_hold.ring_fill: the device's rule)."""
    return ring_fill(h, w, ring).astype(np.float32) * np.float32(1.0 / 255.0)


def tint_weights(
    local: np.ndarray, face_size: float, box: tuple[int, int, int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """In the box: the lips ring (outer lips less the opening, where the difference is read) and where the
    tint goes (the kept mouth on the lips: fading out across the opening's edge and the outer lips' edge, so
    where the kept mouth reaches past the pasted face's lips onto its skin the target stays as it is)."""
    x0, y0, x1, y1 = box
    h, w = y1 - y0, x1 - x0
    pts = np.asarray(local, dtype=np.float64) - (x0, y0)
    outer, opening = fill(h, w, pts[list(OUTER_LIPS)]), fill(h, w, pts[list(INNER_LIPS)])
    ring = np.maximum(outer - opening, 0.0)
    sigma = max(0.5, face_size * OPENING_FEATHER)
    soft_opening = cv2.GaussianBlur(opening, (0, 0), sigma)
    soft_outer = cv2.GaussianBlur(outer, (0, 0), sigma)
    kept = region_mask((h, w), pts, ("mouth",), face_size)
    return ring, kept * (soft_outer - soft_opening)


def lip_shift(difference: np.ndarray, ring: np.ndarray, face_size: float) -> np.ndarray:
    """(h, w, 3): the difference's normalised low-pass over the ring, faded where the ring is far."""
    sigma = max(1.0, face_size * SIGMA)
    num = cv2.GaussianBlur(difference * ring[:, :, None], (0, 0), sigma)
    den = cv2.GaussianBlur(ring, (0, 0), sigma)
    scale = np.clip(den * np.float32(1.0 / SUPPORT), 0.0, 1.0) / np.maximum(den, np.float32(1e-3))
    shift = num * scale[:, :, None]
    if LIGHTNESS != 1.0:  # the luma part of the shift kept at LIGHTNESS, the colour whole
        shift -= np.float32(1.0 - LIGHTNESS) * (shift @ np.asarray(LUMA, np.float32))[:, :, None]
    return np.asarray(shift, np.float32)


def wear(
    image: np.ndarray, roi: np.ndarray, mask: np.ndarray, local: np.ndarray, face_size: float
) -> tuple[np.ndarray, np.ndarray]:
    """The patch (`image` float RGB, `mask` with the kept regions already cut) with the kept mouth in the
    source's lip colour: inside the lips' box the patch is the finished blend (mask 1), the target's pixels
    (`roi`) there moved by the lips' shift. `local`: the target's mesh in the patch's coordinates."""
    box = lips_box(local, face_size, mask.shape[:2])
    if box is None:
        return image, mask
    x0, y0, x1, y1 = box
    ring, weight = tint_weights(local, face_size, box)
    if float(ring.sum()) < 4.0:
        return image, mask
    face = image[y0:y1, x0:x1].astype(np.float32)
    target = roi[y0:y1, x0:x1].astype(np.float32)
    shift = lip_shift(face - target, ring, face_size)
    m = mask[y0:y1, x0:x1, None]
    out_image, out_mask = np.array(image, dtype=np.float32), mask.copy()
    out_image[y0:y1, x0:x1] = m * face + (1.0 - m) * (target + shift * weight[:, :, None])
    out_mask[y0:y1, x0:x1] = 1.0
    return out_image, out_mask
