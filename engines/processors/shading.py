"""The target's light on the source's skin: the source's shading taken out once, the target's put in per face.

Why: a source photo's light (a highlight beside an eye, a hard shadow down one cheek, a warm cast) is baked
into its pixels, and one colour statistic for the whole face carries it onto every target. Without weights the
shading is read as what it is on skin, a smooth field multiplying the skin's own colour:

- Once per source (`delit`, at upload): the source's luminance is low-passed over its skin alone (a
  normalised convolution: eyes, lips, brows and whatever the validity map refuses weigh nothing) at
  SOURCE_SIGMA of the face size, and the source is divided by it. What is left is the skin's own colour with
  its pores, freckles and features; the highlight, the terminator and the darker side are gone.
- Per face (`relight`): the target's skin and the warped source's, each low-passed the same way at
  LIGHT_SIGMA (on a copy shrunk so the filter is a few pixels wide), and the warped face multiplied by their
  ratio, per RGB channel. The result's low frequencies are the target's: its light, and its colour region by
  region (cheeks, forehead, around the eyes, lips, smoothly from one to the next), with no global statistic.
  Eyes, lids and brows take the ratio of the skin around them (they weigh nothing in it), so a source's dark
  make-up keeps its own colour under the target's light instead of being stretched into a cast.

A ratio of low-passed images is the low-frequency ratio image of relighting without a 3-D model; the source's
side needs no per-frame work. `tensor_ops.relight` is the same step on the torch device.
"""

from __future__ import annotations

import cv2
import numpy as np

from engines.processors.masks import EYE_LEFT, EYE_RIGHT, OUTER_LIPS

SOURCE_SIGMA = 0.08  # the source's shading: low-pass width, fraction of the face size (once per source)
LIGHT_SIGMA = 0.25  # the per-face ratio's low-pass width, fraction of the face size
WORK_SIGMA = 2.0  # px: the per-face low-pass runs on a copy shrunk until its filter is about this wide
PRIOR = 0.05  # far from any skin the ratio falls back to the whole face's mean ratio (this much weight)
DETAIL = (0.5, 2.0)  # bounds of the lightness detail's contrast ratio (the skins' spread, target / source)
CHROMA_DETAIL = (0.5, 2.0)  # and of a*'s and b*'s
SOURCE_GAIN = (0.6, 1.6)  # bounds of the source's de-lighting
# FaceMesh's brows: upper edge, then the lower edge back (one closed ring per brow)
BROW_RIGHT = (70, 63, 105, 66, 107, 55, 65, 52, 53, 46)  # image left
BROW_LEFT = (336, 296, 334, 293, 300, 276, 283, 282, 295, 285)  # image right
FEATURES = (OUTER_LIPS, EYE_RIGHT, EYE_LEFT, BROW_RIGHT, BROW_LEFT)
FEATURE_GROW = 0.03  # the features grown by this fraction of the face size before they are left out
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)


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


def delit(image: np.ndarray, validity: np.ndarray | None, landmarks: np.ndarray) -> np.ndarray:
    """The source (H, W, 3) uint8 RGB with its shading divided out inside the face's box: its luminance
    over its mean skin luminance, low-passed over the valid skin (`validity` (H, W) uint8, None: all) at
    SOURCE_SIGMA of the face size. Outside the box it is unchanged (the validity map refuses it anyway)."""
    size = face_size_of(landmarks)
    sigma = max(1.0, size * SOURCE_SIGMA)
    hh, ww = image.shape[:2]
    pad = int(np.ceil(4 * sigma)) + 2
    lo = np.floor(landmarks.min(0)).astype(int) - pad
    hi = np.ceil(landmarks.max(0)).astype(int) + pad
    x0, y0, x1, y1 = max(int(lo[0]), 0), max(int(lo[1]), 0), min(int(hi[0]), ww), min(int(hi[1]), hh)
    if x1 - x0 < 4 or y1 - y0 < 4:
        return image
    box = image[y0:y1, x0:x1].astype(np.float32)
    weight = skin_weight((y1 - y0, x1 - x0), landmarks - (x0, y0), size).astype(np.float32)
    if validity is not None:
        weight *= validity[y0:y1, x0:x1].astype(np.float32) * np.float32(1.0 / 255.0)
    if float(weight.sum()) < 16.0:
        return image
    luma = box @ _LUMA
    level = float((luma * weight).sum() / weight.sum())
    # blurred weight and weighted luminance: their ratio is the local mean of skin luminance; the prior pulls
    # it to the face's mean where little skin is near (eyes, brows, the box's edge)
    num = cv2.GaussianBlur(luma * weight, (0, 0), sigma) + PRIOR * level
    den = cv2.GaussianBlur(weight, (0, 0), sigma) + PRIOR
    gain = np.clip(level * den / np.maximum(num, 1e-3), *SOURCE_GAIN).astype(np.float32)
    out = image.copy()
    out[y0:y1, x0:x1] = np.clip(box * gain[:, :, None] + 0.5, 0, 255).astype(np.uint8)
    return out


def work_scale(face_size: float) -> int:
    """The per-face low-pass's shrink factor: its LIGHT_SIGMA filter about WORK_SIGMA px wide there."""
    return max(1, int(face_size * LIGHT_SIGMA / WORK_SIGMA))


def relight(warped: np.ndarray, target: np.ndarray, skin: np.ndarray, face_size: float) -> np.ndarray:
    """The warped source (h, w, 3) on the target's (h, w, 3) low frequencies, read over `skin` (h, w) bool:
    float32 RGB 0..255. In CIE L*a*b*, each channel is the target's skin low-passed (its light and its
    colour, region by region) plus the warped face's own detail about its low-pass, that detail at the
    target's contrast (lightness by the skins' spread, within DETAIL; a* and b* within CHROMA_DETAIL, 1: a
    colour added the same to skin and lids alike, so the lids keep their colour relative to the skin)."""
    h, w = skin.shape
    weight = skin.astype(np.float32)
    total = float(weight.sum())
    if total < 16.0:
        return warped.astype(np.float32)
    scale = np.float32(1.0 / 255.0)
    w_lab = cv2.cvtColor(np.multiply(warped, scale, dtype=np.float32), cv2.COLOR_RGB2LAB)
    t_lab = cv2.cvtColor(np.multiply(target, scale, dtype=np.float32), cv2.COLOR_RGB2LAB)
    k = work_scale(face_size)
    wf = weight[:, :, None]
    stack = np.concatenate([t_lab * wf, w_lab * wf, wf], axis=2)
    means = stack[:, :, :6].reshape(-1, 6).sum(0) / total
    small = stack if k == 1 else cv2.resize(stack, ((w + k - 1) // k, (h + k - 1) // k), cv2.INTER_AREA)
    small = cv2.GaussianBlur(small, (0, 0), face_size * LIGHT_SIGMA / k)
    # the two low-passes (target's, source's): where little skin is near, the face's mean
    local = (small[:, :, :6] + np.float32(PRIOR) * means) / (small[:, :, 6:] + np.float32(PRIOR))
    if k > 1:
        local = cv2.resize(local, (w, h), interpolation=cv2.INTER_LINEAR)
    mask = skin.view(np.uint8)
    _, t_std = cv2.meanStdDev(t_lab, mask=mask)
    _, w_std = cv2.meanStdDev(w_lab, mask=mask)
    detail = (t_std[:, 0] + 1e-3) / (w_std[:, 0] + 1e-3)
    detail[0] = np.clip(detail[0], *DETAIL)
    detail[1:] = np.clip(detail[1:], *CHROMA_DETAIL)
    w_lab -= local[:, :, 3:]
    w_lab *= detail.astype(np.float32)
    w_lab += local[:, :, :3]
    rgb = np.asarray(cv2.cvtColor(w_lab, cv2.COLOR_LAB2RGB), dtype=np.float32)
    rgb *= np.float32(255.0)
    return rgb
