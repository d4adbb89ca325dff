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

from engines.processors.masks import INNER_LIPS, OUTER_LIPS

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
    """(h, w) float32 {0, 1}: the ring's polygon filled (cv2.fillPoly at 1/16 px; the device twin uploads
    the same fills)."""
    out = np.zeros((h, w), np.uint8)
    cv2.fillPoly(out, [np.round(np.asarray(ring) * 16).astype(np.int32)], 1, lineType=cv2.LINE_8, shift=4)
    return out.astype(np.float32)


def lips_fills(local: np.ndarray, box: tuple[int, int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """In the box: the outer lips filled and the opening (inner lips) filled."""
    x0, y0, x1, y1 = box
    pts = np.asarray(local, dtype=np.float64) - (x0, y0)
    return fill(y1 - y0, x1 - x0, pts[list(OUTER_LIPS)]), fill(y1 - y0, x1 - x0, pts[list(INNER_LIPS)])


def tint_weight(outer: np.ndarray, opening: np.ndarray, kept: np.ndarray, face_size: float) -> np.ndarray:
    """Where the tint goes: the kept mouth on the lips, fading out across the opening's edge and the outer
    lips' edge (where the kept mouth reaches past the pasted face's lips onto its skin the target stays)."""
    sigma = max(0.5, face_size * OPENING_FEATHER)
    return np.asarray(
        kept * (cv2.GaussianBlur(outer, (0, 0), sigma) - cv2.GaussianBlur(opening, (0, 0), sigma))
    )


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
    image: np.ndarray,
    roi: np.ndarray,
    mask: np.ndarray,
    kept: np.ndarray,
    local: np.ndarray,
    face_size: float,
) -> None:
    """In place: the patch (`image` float32 RGB, `mask` with the kept regions already cut, `kept` the kept
    regions' map) with the kept mouth in the source's lip colour: inside the lips' box the patch becomes the
    finished blend (mask 1), the target's pixels (`roi`) there moved by the lips' shift. `local`: the
    target's mesh in the patch's coordinates."""
    box = lips_box(local, face_size, mask.shape[:2])
    if box is None:
        return
    x0, y0, x1, y1 = box
    outer, opening = lips_fills(local, box)
    ring = np.maximum(outer - opening, 0.0)
    if float(ring.sum()) < 4.0:
        return
    weight = tint_weight(outer, opening, kept[y0:y1, x0:x1], face_size)
    face = image[y0:y1, x0:x1]
    target = roi[y0:y1, x0:x1].astype(np.float32)
    shift = lip_shift(face - target, ring, face_size)
    m = mask[y0:y1, x0:x1, None]
    image[y0:y1, x0:x1] = m * face + (1.0 - m) * (target + shift * weight[:, :, None])
    mask[y0:y1, x0:x1] = 1.0
