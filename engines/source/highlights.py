"""A source photo's strong highlights tamed once, at upload: a specular spot does not travel to every target.

Why: the swap keeps the source's detail finer than a quarter of the face (`processors.shading`), and a
photo's specular spot (a flash on the nose, a hard side light's sheen) is such detail: pasted, it glows on
a face lit otherwise. Dividing the source's shading out cost identity (the embedder reads a face's own
shading), so only what stands out is taken: in CIE L*, the skin's lightness about its low-pass (normalised,
over the valid skin) is smoothed at SPOT_SIGMA of the face size, and where that rises above KNEE the excess
is cut to KEEP of itself. A face's ordinary sheen stays under the knee; fine detail (pores, lashes) stays.
"""

from __future__ import annotations

import cv2
import numpy as np

from engines.processors.masks import face_size_of, skin_weight

LOW_SIGMA = 0.25  # the skin's low-pass, fraction of the face size (as the per-frame relight's)
SPOT_SIGMA = 0.03  # a highlight's smooth part: its rise about the low-pass blurred by this much of the face
KNEE = 10.0  # L* above the low-pass a highlight may rise untouched (the sources' own sheen: 6-9 at p90)...
KEEP = 0.25  # ...and the share of its excess left


def tamed(image: np.ndarray, landmarks: np.ndarray, validity: np.ndarray) -> np.ndarray:
    """`image` (H, W, 3) uint8 RGB with its highlights above KNEE cut (the same array when none is);
    `validity` (H, W) uint8: where the source may be pasted, the only place it changes."""
    size = face_size_of(landmarks)
    h, w = image.shape[:2]
    weight = (skin_weight((h, w), landmarks, size) & (validity > 127)).astype(np.float32)
    if weight.sum() < 16:
        return image
    lab = cv2.cvtColor(image.astype(np.float32) * np.float32(1.0 / 255.0), cv2.COLOR_RGB2LAB)
    light = lab[:, :, 0]
    sigma = size * LOW_SIGMA
    low = cv2.GaussianBlur(light * weight, (0, 0), sigma) / np.maximum(
        cv2.GaussianBlur(weight, (0, 0), sigma), np.float32(1e-3)
    )
    spot = cv2.GaussianBlur(light - low, (0, 0), max(size * SPOT_SIGMA, 0.5))
    excess = np.maximum(spot - np.float32(KNEE), 0) * (validity.astype(np.float32) * np.float32(1.0 / 255.0))
    if not excess.any():
        return image
    lab[:, :, 0] = light - np.float32(1.0 - KEEP) * excess
    cut = np.clip(cv2.cvtColor(lab, cv2.COLOR_LAB2RGB) * np.float32(255.0) + np.float32(0.5), 0, 255)
    out = image.copy()
    touched = excess > 0  # the rest keeps its exact pixels (no colour-space round trip)
    out[touched] = cut[touched].astype(np.uint8)
    return out
