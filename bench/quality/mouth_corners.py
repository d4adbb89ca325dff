"""Where the target's mouth corners are in an output picture: its own corners, found by template matching.

Why: every landmarker reads a swapped mouth narrower than it is (FaceMesh reads the target moved to the
source's shape alone, its mouth the target's own pixels and its new mesh's corners exactly the target's,
5-8 % narrower; dlib's 68 points likewise): on a face that looks like someone else they place the corners
inward. The target's own corners are a better ruler: a patch of the target's edge image around each
FaceMesh corner, matched in the output's edge image within a small window (`SEARCH` of the mouth's width)
around the same place, reads the target itself as 1.00 (to a tenth of a pixel: the peak's sub-pixel fit).
Edges (Sobel magnitude), not the pictures, are matched, so the source's skin tone and the relit lips do not
pull the match.
"""

from __future__ import annotations

import cv2
import numpy as np

MOUTH_CORNERS = (61, 291)  # FaceMesh's outer mouth corners, image left then right
PATCH = 0.15  # a corner's template: this fraction of the target's mouth width each side of the corner
SEARCH = 0.1  # the search window: this fraction of the mouth width each way
EDGE_SIGMA = 1.0  # the pictures smoothed this much (px) before their gradient is taken


def mouth_width(landmarks: np.ndarray) -> float:
    a, b = MOUTH_CORNERS
    return float(np.linalg.norm(landmarks[b].astype(np.float64) - landmarks[a].astype(np.float64)))


def edges(image: np.ndarray) -> np.ndarray:
    """The gradient magnitude (float32, h x w) of an RGB picture's grey, lightly smoothed."""
    grey = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY).astype(np.float32)
    smooth = cv2.GaussianBlur(grey, (0, 0), EDGE_SIGMA)
    gx = cv2.Sobel(smooth, cv2.CV_32F, 1, 0, ksize=3)
    gy = cv2.Sobel(smooth, cv2.CV_32F, 0, 1, ksize=3)
    return np.asarray(cv2.magnitude(gx, gy), np.float32)


def _refine(line: np.ndarray, k: int) -> float:
    """The offset (-0.5..0.5) of the peak at `k` of `line` by a parabola through it and its neighbours."""
    if not 0 < k < len(line) - 1:
        return 0.0
    a, b, c = float(line[k - 1]), float(line[k]), float(line[k + 1])
    bend = a - 2.0 * b + c
    return float(np.clip(0.5 * (a - c) / bend, -0.5, 0.5)) if bend < 0.0 else 0.0


def _peak(scores: np.ndarray) -> tuple[float, float]:
    """The best score's position (x, y) in `scores`, to a fraction of a pixel."""
    _, _, _, (mx, my) = cv2.minMaxLoc(scores)
    return mx + _refine(scores[my, :], mx), my + _refine(scores[:, mx], my)


def matched_corners(target: np.ndarray, target_lm: np.ndarray, output: np.ndarray) -> np.ndarray | None:
    """The target's mouth corners (2, 2: image left, right) as found in `output` (same size as `target`):
    each FaceMesh corner plus where its edge patch matches best; None where a patch or its window leaves
    the picture."""
    width = mouth_width(target_lm)
    r = max(4, int(round(PATCH * width)))
    s = max(2, int(round(SEARCH * width)))
    h, w = target.shape[:2]
    corners = target_lm[list(MOUTH_CORNERS)].astype(np.float64)
    lo = np.floor(corners.min(0)).astype(int) - r - s - 2
    hi = np.ceil(corners.max(0)).astype(int) + r + s + 3
    if lo[0] < 0 or lo[1] < 0 or hi[0] > w or hi[1] > h:
        return None
    t_edges = edges(target[lo[1] : hi[1], lo[0] : hi[0]])
    o_edges = edges(output[lo[1] : hi[1], lo[0] : hi[0]])
    found = np.empty((2, 2))
    for k, corner in enumerate(corners):
        cx, cy = (int(round(v)) for v in corner - lo)
        template = t_edges[cy - r : cy + r + 1, cx - r : cx + r + 1]
        window = o_edges[cy - r - s : cy + r + s + 1, cx - r - s : cx + r + s + 1]
        scores = cv2.matchTemplate(window, template, cv2.TM_CCOEFF_NORMED)
        px, py = _peak(scores)
        found[k] = corner + (px - s, py - s)
    return found


def width_ratio(target_lm: np.ndarray, corners: np.ndarray) -> float:
    """The matched corners' distance over the target's (FaceMesh's) mouth width."""
    return float(np.linalg.norm(corners[1] - corners[0])) / max(mouth_width(target_lm), 1e-6)
