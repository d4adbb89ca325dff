"""A source photo's strong highlights tamed once, at upload: a specular spot does not travel to every target.

Why: the swap keeps the source's detail finer than a quarter of the face (`processors.shading`), and a
photo's specular spot (a flash on the nose, a hard side light's sheen) is such detail: pasted, it glows on
a face lit otherwise. Dividing the source's shading out cost identity (the embedder reads a face's own
shading), so only what stands out is taken: in CIE L*, the skin's lightness about its low-pass (normalised,
over the valid skin) is smoothed at SPOT_SIGMA of the face size, and where that rises above KNEE the excess
is cut to KEEP of itself. A spot is the light's colour, not the skin's: from CHROMA_KNEE up (in full at KNEE),
around a cut, its a*b* departure from the skin's low-pass goes too, the fine part with it (a white spot's grey
core, if kept, reads teal on a warm target). Sheen and fine detail stay.
"""

from __future__ import annotations

import cv2
import numpy as np

from engines.processors.masks import face_size_of, skin_weight

LOW_SIGMA = 0.25  # the skin's low-pass, fraction of the face size (as the per-frame relight's)...
WORK_SIGMA = 2.0  # ...run on a copy shrunk until its filter is about this many pixels wide
SPOT_SIGMA = 0.03  # a highlight's smooth part: its rise about the low-pass blurred by this much of the face
KNEE = 10.0  # L* above the low-pass a highlight may rise untouched (the sources' own sheen: 6-9 at p90)...
KEEP = 0.25  # ...and the share of its excess left
CHROMA_KNEE = 5.0  # L*: from this rise the spot's own colour fades to the skin's (gone at KNEE)


def _blurred(x: np.ndarray, sigma: float, border: int = cv2.BORDER_DEFAULT) -> tuple[np.ndarray, int]:
    """`x` (h, w[, c]) float32 blurred by `sigma` on a copy shrunk k times so the filter is about WORK_SIGMA
    wide: (the shrunk, blurred copy, k)."""
    h, w = x.shape[:2]
    k = max(1, int(sigma / WORK_SIGMA))
    if k > 1:
        size = (max(1, -(-w // k)), max(1, -(-h // k)))
        x = np.asarray(cv2.resize(x, size, interpolation=cv2.INTER_AREA), dtype=np.float32)
    return np.asarray(cv2.GaussianBlur(x, (0, 0), sigma / k, borderType=border), dtype=np.float32), k


def _stretched(x: np.ndarray, k: int, h: int, w: int) -> np.ndarray:
    """A `_blurred` copy (shrunk k times) stretched back to (h, w)."""
    if k == 1:
        return x
    return np.asarray(cv2.resize(x, (w, h), interpolation=cv2.INTER_LINEAR), dtype=np.float32)


def _low_pass(light: np.ndarray, weight: np.ndarray, sigma: float) -> np.ndarray:
    """`light` (h, w) low-passed over `weight` (normalised convolution, nothing read past the box)."""
    pair, k = _blurred(np.dstack([light * weight, weight]).astype(np.float32), sigma, cv2.BORDER_CONSTANT)
    low = np.asarray(pair[:, :, 0] / np.maximum(pair[:, :, 1], np.float32(1e-4)), dtype=np.float32)
    return _stretched(low, k, *light.shape)


def _smooth(x: np.ndarray, sigma: float) -> np.ndarray:
    """`x` (h, w) float32 blurred by `sigma` (on the shrunk copy)."""
    blurred, k = _blurred(x, sigma)
    return _stretched(blurred, k, *x.shape)


def tamed(image: np.ndarray, landmarks: np.ndarray, validity: np.ndarray) -> np.ndarray:
    """`image` (H, W, 3) uint8 RGB with its highlights above KNEE cut (the same array when none is);
    `validity` (H, W) uint8: where the source may be pasted, the only place it changes (worked on its box)."""
    ys, xs = np.nonzero(validity)
    if ys.size < 16:
        return image
    y0, y1, x0, x1 = int(ys.min()), int(ys.max()) + 1, int(xs.min()), int(xs.max()) + 1
    crop, valid = image[y0:y1, x0:x1], validity[y0:y1, x0:x1]
    points = np.asarray(landmarks, dtype=np.float64) - (x0, y0)
    size = face_size_of(points)
    weight = (skin_weight(valid.shape, points, size) & (valid > 127)).astype(np.float32)
    if weight.sum() < 16:
        return image
    lab = cv2.cvtColor(crop.astype(np.float32) * np.float32(1.0 / 255.0), cv2.COLOR_RGB2LAB)
    light = np.ascontiguousarray(lab[:, :, 0])
    low = _low_pass(light, weight, size * LOW_SIGMA)
    spot = cv2.GaussianBlur(light - low, (0, 0), max(size * SPOT_SIGMA, 0.5))
    inside = valid > 0
    excess = np.maximum(spot - np.float32(KNEE), 0) * (valid.astype(np.float32) * np.float32(1.0 / 255.0))
    if not excess.any():
        return image
    # the spot's colour: its a*b* departure from the skin's (fine part too), taken out by `fade`
    # around a spot that is cut (its tail from CHROMA_KNEE up; a sheen elsewhere keeps its colour)
    blur = max(size * SPOT_SIGMA, 0.5)
    near = np.clip(_smooth((excess > 0).astype(np.float32), 2.0 * blur) * 5.0, 0, 1)
    fade = np.clip((spot - np.float32(CHROMA_KNEE)) / np.float32(KNEE - CHROMA_KNEE), 0, 1) * near * inside
    touched = (excess > 0) | (fade > 0)  # the rest keeps its exact pixels (no colour-space round trip)
    lab[:, :, 0] = light - np.float32(1.0 - KEEP) * excess
    for c in (1, 2):
        chroma = np.ascontiguousarray(lab[:, :, c])
        departure = chroma - _low_pass(chroma, weight, size * LOW_SIGMA)
        lab[:, :, c] = chroma - fade * departure
    cut = np.clip(cv2.cvtColor(lab, cv2.COLOR_LAB2RGB) * np.float32(255.0) + np.float32(0.5), 0, 255)
    out = image.copy()
    out[y0:y1, x0:x1][touched] = cut[touched].astype(np.uint8)
    return out
