"""The target's light on the source's skin, region by region, without weights.

Why: a source photo's light (a highlight beside an eye, a warm cast, a darker side) and skin tone travel
with its pixels, and one colour statistic for the whole face (the LAB mean and spread matched on the skin)
carries them onto every target, and stretches a source's dark make-up into red-orange lids and brows.

Per face (`relight`), in CIE L*a*b*: the target's skin and the warped source's are each low-passed over the
skin alone (a normalised convolution: lips, eyes and brows, grown, weigh nothing; where little skin is near,
the face's mean), at LIGHT_SIGMA of the face size on a copy shrunk by whole cells so the filter is a few
pixels wide. The result is the target's low-pass (its light and its colour, forehead, cheeks, around the
eyes and the lips each their own, blended smoothly between them) plus the source's own detail about its
low-pass: lightness at the target's contrast (the skins' spread, within DETAIL), a* and b* as they are
(CHROMA_DETAIL 1), so the lids and brows keep the colour they have against the source's skin. What is left of
the source's light is what lies in its detail: a source's highlight or shadow no broader than the filter.

Taking the source's shading out once, at upload (its skin's low-passed lightness divided out at 5-10 % of the
face size), was measured and left out: on the quality report's 11 cases it lowered the identity margin by
0.02-0.06 in every variant tried (the embedder reads the source's own shading as part of the face).
`tensor_shading.relight` is the same step on the torch device.
"""

from __future__ import annotations

import cv2
import numpy as np

from engines.processors.masks import EYE_LEFT, EYE_RIGHT, OUTER_LIPS

LIGHT_SIGMA = 0.25  # the per-face ratio's low-pass width, fraction of the face size
WORK_SIGMA = 2.0  # px: the per-face low-pass runs on a copy shrunk until its filter is about this wide
PRIOR = 0.05  # far from any skin the low-pass falls back to the face's mean (this much weight)
DETAIL = (0.75, 2.0)  # bounds of the lightness detail's contrast ratio (the skins' spread, target / source)
CHROMA_DETAIL = (1.0, 1.0)  # and of a*'s and b*'s (1: lids and brows keep their colour against the skin)
# FaceMesh's brows: upper edge, then the lower edge back (one closed ring per brow)
BROW_RIGHT = (70, 63, 105, 66, 107, 55, 65, 52, 53, 46)  # image left
BROW_LEFT = (336, 296, 334, 293, 300, 276, 283, 282, 295, 285)  # image right
FEATURES = (OUTER_LIPS, EYE_RIGHT, EYE_LEFT, BROW_RIGHT, BROW_LEFT)
FEATURE_GROW = 0.03  # the features grown by this fraction of the face size before they are left out


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


def work_scale(face_size: float) -> int:
    """The per-face low-pass's shrink factor (whole cells): its LIGHT_SIGMA filter about WORK_SIGMA px wide
    there."""
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
    hs, ws = (h + k - 1) // k, (w + k - 1) // k
    wf = weight[:, :, None]

    def cells(x: np.ndarray) -> np.ndarray:  # k x k cell means, the box padded with zeros (weight 0)
        if k == 1:
            return x
        padded = cv2.copyMakeBorder(x, 0, hs * k - h, 0, ws * k - w, cv2.BORDER_CONSTANT, value=0)
        return np.asarray(cv2.resize(padded, (ws, hs), interpolation=cv2.INTER_AREA))

    t_cells, w_cells, weight_cells = cells(t_lab * wf), cells(w_lab * wf), cells(weight)
    # the face's mean: the cells' sums over the weight's
    means = np.concatenate([t_cells.reshape(-1, 3).sum(0), w_cells.reshape(-1, 3).sum(0)])
    means /= np.float32(max(float(weight_cells.sum()), 1e-6))
    small = cv2.GaussianBlur(np.dstack([t_cells, w_cells, weight_cells]), (0, 0), face_size * LIGHT_SIGMA / k)
    # the two low-passes (target's, source's): where little skin is near, the face's mean
    lows = []
    for c in (0, 3):
        low = (small[:, :, c : c + 3] + np.float32(PRIOR) * means[c : c + 3]) / (
            small[:, :, 6:] + np.float32(PRIOR)
        )
        if k > 1:  # stretched back over the padded cells, then cut to the box
            low = cv2.resize(low, (ws * k, hs * k), interpolation=cv2.INTER_LINEAR)[:h, :w]
        lows.append(low)
    mask = skin.view(np.uint8)
    _, t_std = cv2.meanStdDev(t_lab, mask=mask)
    _, w_std = cv2.meanStdDev(w_lab, mask=mask)
    detail = (t_std[:, 0] + 1e-3) / (w_std[:, 0] + 1e-3)
    detail[0] = np.clip(detail[0], *DETAIL)
    detail[1:] = np.clip(detail[1:], *CHROMA_DETAIL)
    w_lab -= lows[1]
    w_lab *= detail.astype(np.float32)
    w_lab += lows[0]
    rgb = np.asarray(cv2.cvtColor(w_lab, cv2.COLOR_LAB2RGB), dtype=np.float32)
    rgb *= np.float32(255.0)
    return rgb
