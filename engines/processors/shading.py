"""The target's light on the source's skin, region by region, without weights.

Why: a source photo's light (a highlight, a warm cast, a darker side) and skin tone travel with its pixels;
one colour statistic for the whole face carries them onto every target and turns a source's dark make-up
into red-orange lids. Per face (`relight`), in CIE L*a*b*: the target's skin and the warped source's are each
low-passed over the skin alone (a normalised convolution: lips, eyes and brows weigh nothing) at LIGHT_SIGMA
of the face size, on a shrunk copy. The result is the target's low-pass (its light and colour, region by
region) plus the source's own detail about its low-pass: lightness at the target's contrast (within DETAIL),
a* and b* by the skins' chroma ratio (CHROMA_GAIN), so lids and brows keep their colour against the skin. The
source's own shading is kept (dividing it out cost identity) but its strong highlights, cut at upload
(`engines.source.highlights`), and near the paste's edge (`edge_shading`). `tensor_shading`: on the device.
"""

from __future__ import annotations

import cv2
import numpy as np

LIGHT_SIGMA = 0.25  # the per-face ratio's low-pass width, fraction of the face size
WORK_SIGMA = 2.0  # px: the per-face low-pass runs on a copy shrunk until its filter is about this wide
PRIOR = 0.05  # far from any skin the low-pass falls back to the face's mean (this much weight)
DETAIL = (0.85, 2.0)  # bounds of the lightness detail's contrast ratio (the skins' spread, target / source):
# on a flatter target the source's features keep most of their own contrast (identity)
GRAIN_SIGMA = 0.01  # lightness detail finer than this (fraction of the face: grain, noise) is never raised
CHROMA_DETAIL = (1.0, 1.0)  # and of a*'s and b*'s spread...
# ...and, per pixel, the a*b* detail scaled by the skins' chroma (target's low-pass / source's, each + FLOOR)
# within CHROMA_GAIN: a feature as far from a warm skin's colour as a dark brow is from a dark face is that
# much less far on a paler one, so it stays near neutral instead of turning teal (the gain is a ratio, as
# albedo is; the floor keeps it steady on near-grey skin, and it never adds chroma the source lacks)
CHROMA_GAIN = (0.25, 1.0)
CHROMA_FLOOR = 3.0
# Toward the paste's edge the source's own shading (its lightness detail coarser than MID_SIGMA of the face: a
# cheek darkening as it turns from the source's light) fades out, so the face meets the target's skin in the
# target's light and only its fine detail: over the paste's mask blurred by EDGE_SIGMA of the face, none of
# that shading where the blurred mask is at half or less, all of it where it is whole.
EDGE_SIGMA = 0.08
MID_SIGMA = 0.08
# OpenCV's 8-bit L*a*b*: L* x 255 / 100, a* and b* + 128
LAB8_SCALE = np.array([100.0 / 255.0, 1.0, 1.0], np.float32)
LAB8_OFFSET = np.array([0.0, 128.0, 128.0], np.float32)


def work_scale(face_size: float, sigma: float = LIGHT_SIGMA) -> int:
    """A per-face filter's shrink factor (whole cells): its `sigma` (fraction of the face; by default the
    low-pass's) about WORK_SIGMA px wide there."""
    return max(1, int(face_size * sigma / WORK_SIGMA))


def shrunk(x: np.ndarray, k: int) -> np.ndarray:
    """k x k cell means of an (h, w[, c]) float32 box, padded with zeros up to whole cells (weight 0)."""
    if k == 1:
        return x
    h, w = x.shape[:2]
    hs, ws = (h + k - 1) // k, (w + k - 1) // k
    padded = cv2.copyMakeBorder(x, 0, hs * k - h, 0, ws * k - w, cv2.BORDER_CONSTANT, value=0)
    return np.asarray(cv2.resize(padded, (ws, hs), interpolation=cv2.INTER_AREA))


def stretched(x: np.ndarray, k: int, h: int, w: int) -> np.ndarray:
    """A `shrunk` copy stretched back (bilinear) over its padded cells, then cut to the (h, w) box."""
    if k == 1:
        return x
    hs, ws = x.shape[:2]
    return np.asarray(cv2.resize(x, (ws * k, hs * k), interpolation=cv2.INTER_LINEAR))[:h, :w]


def chroma_gain(target_low: np.ndarray, source_low: np.ndarray) -> np.ndarray:
    """(h, w) float32: the a*b* detail's gain from the two skins' low-passed chroma (h, w, 3 L*a*b* each)."""
    floor = np.float32(CHROMA_FLOOR)
    t = np.sqrt(np.square(target_low[:, :, 1]) + np.square(target_low[:, :, 2])) + floor
    s = np.sqrt(np.square(source_low[:, :, 1]) + np.square(source_low[:, :, 2])) + floor
    return np.asarray(np.clip(t / s, *CHROMA_GAIN), dtype=np.float32)


def edge_shading(detail: np.ndarray, weight: np.ndarray, paste: np.ndarray, face_size: float) -> np.ndarray:
    """(h, w) float32: the part of the source's lightness `detail` (h, w; about its low-pass) to take off
    near the paste's edge: its mid band (low-passed over the skin `weight`, at MID_SIGMA of the face) times
    how near the edge each pixel is (1 where the `paste` mask blurred by EDGE_SIGMA is at half or less, 0
    where it is whole). All smooth: it runs on a copy shrunk so EDGE_SIGMA is about WORK_SIGMA px wide."""
    k = work_scale(face_size, EDGE_SIGMA)
    stack = shrunk(np.dstack([detail * weight, weight, paste]).astype(np.float32, copy=False), k)
    mid_sigma, edge_sigma = face_size * MID_SIGMA / k, face_size * EDGE_SIGMA / k
    both = cv2.GaussianBlur(np.ascontiguousarray(stack[:, :, :2]), (0, 0), mid_sigma)
    mid = both[:, :, 0] / np.maximum(both[:, :, 1], np.float32(1e-3))
    whole = cv2.GaussianBlur(np.ascontiguousarray(stack[:, :, 2]), (0, 0), edge_sigma)
    near = np.float32(1.0) - np.clip(whole * np.float32(2.0) - np.float32(1.0), 0.0, 1.0)
    return stretched(np.asarray(mid * near, dtype=np.float32), k, *weight.shape)


def relight(
    warped: np.ndarray,
    target: np.ndarray,
    skin: np.ndarray,
    face_size: float,
    paste: np.ndarray | None = None,
) -> np.ndarray:
    """The warped source (h, w, 3 RGB) on the target's (h, w, 3 uint8) low frequencies, read over `skin`
    (h, w): float32 RGB 0..255 (`relight_lab` of its L*a*b*). In CIE L*a*b*, each channel is the target's
    skin low-passed (its light and its colour, region by region) plus the warped face's own detail about
    its low-pass, that detail at the target's contrast (lightness by the skins' spread, within DETAIL, its
    grain never raised; a* and b* by the skins' chroma, `chroma_gain`, so lids and brows keep their colour
    relative to the skin, no cast).
    With the paste's mask `paste` (h, w float), the source's own shading fades out toward its edge
    (`edge_shading`)."""
    if float(np.count_nonzero(skin)) < 16.0:
        return warped.astype(np.float32)
    scale = np.float32(1.0 / 255.0)
    w_lab = cv2.cvtColor(np.multiply(warped, scale, dtype=np.float32), cv2.COLOR_RGB2LAB)
    return relight_lab(w_lab, target, skin, face_size, paste)


def relight_lab(
    w_lab: np.ndarray,
    target: np.ndarray,
    skin: np.ndarray,
    face_size: float,
    paste: np.ndarray | None = None,
) -> np.ndarray:
    """`relight` of the warped source given in float32 CIE L*a*b* (h, w, 3; OpenCV's float units, changed in
    place): float32 RGB 0..255; under 16 skin pixels, the source as it is."""
    h, w = skin.shape
    weight = skin.astype(np.float32)
    total = float(weight.sum())
    if total < 16.0:
        rgb0 = np.asarray(cv2.cvtColor(w_lab, cv2.COLOR_LAB2RGB), dtype=np.float32)
        rgb0 *= np.float32(255.0)
        return rgb0
    # the target is only low-passed and its spread read: its 8-bit L*a*b* (OpenCV's table path, a quarter
    # of the float conversion's time; within 0.5 L* and 2 a*b* of it), put in float units on the cells and on
    # the spread (the device twin converts in float)
    t_lab = cv2.cvtColor(target, cv2.COLOR_RGB2LAB)
    k = work_scale(face_size)
    wf = cv2.merge((weight, weight, weight))  # not weight[:, :, None]: numpy broadcasts that slowly
    t_cells, w_cells, weight_cells = shrunk(t_lab * wf, k), shrunk(w_lab * wf, k), shrunk(weight, k)
    t_cells = t_cells * LAB8_SCALE - weight_cells[:, :, None] * LAB8_OFFSET
    # the face's mean: the cells' sums over the weight's
    means = np.concatenate([t_cells.reshape(-1, 3).sum(0), w_cells.reshape(-1, 3).sum(0)])
    means /= np.float32(max(float(weight_cells.sum()), 1e-6))
    small = cv2.GaussianBlur(np.dstack([t_cells, w_cells, weight_cells]), (0, 0), face_size * LIGHT_SIGMA / k)
    mask = skin.view(np.uint8)
    _, t_std = cv2.meanStdDev(t_lab, mask=mask)
    t_std = t_std * LAB8_SCALE[:, None]
    _, w_std = cv2.meanStdDev(w_lab, mask=mask)
    detail = (t_std[:, 0] + 1e-3) / (w_std[:, 0] + 1e-3)
    detail[0] = np.clip(detail[0], *DETAIL)
    detail[1:] = np.clip(detail[1:], *CHROMA_DETAIL)
    # the two low-passes (target's, source's; where little skin is near, the face's mean) and the detail's
    # per-pixel scale (lightness's, then a*'s and b*'s by the skins' chroma), all on the cells
    prior = np.float32(PRIOR)
    lows = [(small[:, :, c : c + 3] + prior * means[c : c + 3]) / (small[:, :, 6:] + prior) for c in (0, 3)]
    gain = chroma_gain(lows[0], lows[1])
    d = detail.astype(np.float32)
    spread = np.dstack([np.full_like(gain, d[0]), gain * d[1], gain * d[2]])
    planes = [stretched(p, k, h, w) for p in (lows[0], lows[1], spread)]
    w_lab -= planes[1]
    if paste is not None:
        w_lab[:, :, 0] -= edge_shading(w_lab[:, :, 0], weight, paste, face_size)
    sharpened = d[0] > 1.0  # then only the detail coarser than grain is raised: its noise stays as it was
    if sharpened:
        light = w_lab[:, :, 0].copy()
        coarse = cv2.GaussianBlur(light, (0, 0), max(0.5, GRAIN_SIGMA * face_size))
    w_lab *= planes[2]
    if sharpened:
        w_lab[:, :, 0] = coarse * d[0] + (light - coarse)
    w_lab += planes[0]
    rgb = np.asarray(cv2.cvtColor(w_lab, cv2.COLOR_LAB2RGB), dtype=np.float32)
    rgb *= np.float32(255.0)
    return rgb
