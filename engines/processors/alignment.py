"""Face alignment: 5-point templates, similarity transforms, crops and their inverses.

Every model that eats an aligned face (ArcFace 112, inswapper 128, GFPGAN 512) was trained on crops made by a
similarity transform that maps the five detector landmarks onto a fixed template; using the same templates
(FaceFusion's `WARP_TEMPLATES`, normalised to the crop size) is what makes their outputs meaningful.
"""

from __future__ import annotations

import cv2
import numpy as np

RANSAC_PX = 100.0  # FaceFusion's reprojection threshold for its RANSAC fit (face_helper.py)

# Normalised 5-point templates: eye (image left), eye (image right), nose tip, mouth left, mouth right.
ARCFACE_112_V2 = np.array(
    [
        [0.34191607, 0.46157411],
        [0.65653393, 0.45983393],
        [0.50022500, 0.64050536],
        [0.37097589, 0.82469196],
        [0.63151696, 0.82325089],
    ],
    dtype=np.float32,
)
ARCFACE_128_V2 = np.array(
    [
        [0.36167656, 0.40387734],
        [0.63696719, 0.40235469],
        [0.50019687, 0.56044219],
        [0.38710391, 0.72160547],
        [0.61507734, 0.72034453],
    ],
    dtype=np.float32,
)
FFHQ_512 = np.array(
    [
        [0.37691676, 0.46864664],
        [0.62285697, 0.46912813],
        [0.50123859, 0.61331904],
        [0.39308822, 0.72541100],
        [0.61150205, 0.72490465],
    ],
    dtype=np.float32,
)


def estimate_affine(kps5: np.ndarray, template: np.ndarray, size: int, robust: bool = False) -> np.ndarray:
    """Similarity transform (2x3, float32) taking frame points onto `template * size`.

    Least squares over all five points (closed form). `robust=True` is FaceFusion's fit (since 2.1.0, for
    every template): RANSAC with a 100 px reprojection threshold, which keeps all five points of any face
    and so lands on the least-squares fit. LMEDS (what FaceFusion used before) drops a point as an outlier
    on one frame and not the next: on the talking clip's tracked points it left one out on 53 of 120 frames
    and the 512 crop's corners shook 16.7 per mille of the face size per frame against 11.0 with all five
    (`python -m bench.crop_jitter`).
    """
    dst = (template * size).astype(np.float64)
    src = kps5.astype(np.float64)
    if robust:
        matrix, _ = cv2.estimateAffinePartial2D(
            src.astype(np.float32), dst.astype(np.float32), method=cv2.RANSAC, ransacReprojThreshold=RANSAC_PX
        )
        if matrix is not None:
            return np.asarray(matrix, dtype=np.float32)
    return similarity_lstsq(src, dst)


def similarity_lstsq(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Least-squares similarity (rotation, uniform scale, translation) src -> dst, 2x3 float32."""
    mu_s, mu_d = src.mean(0), dst.mean(0)
    xs, xd = src - mu_s, dst - mu_d
    norm = float((xs**2).sum())
    if norm < 1e-9:  # all points in one place: translation only
        return np.array([[1.0, 0.0, mu_d[0] - mu_s[0]], [0.0, 1.0, mu_d[1] - mu_s[1]]], dtype=np.float32)
    a = float((xs[:, 0] * xd[:, 0] + xs[:, 1] * xd[:, 1]).sum()) / norm
    b = float((xs[:, 0] * xd[:, 1] - xs[:, 1] * xd[:, 0]).sum()) / norm
    rot = np.array([[a, -b], [b, a]])
    t = mu_d - rot @ mu_s
    return np.hstack([rot, t[:, None]]).astype(np.float32)


def warp_crop(image: np.ndarray, matrix: np.ndarray, size: int) -> np.ndarray:
    """The `size`x`size` crop that `matrix` (frame -> crop) selects; borders replicate the frame's edge."""
    return cv2.warpAffine(
        image, matrix, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )


def invert_affine(matrix: np.ndarray) -> np.ndarray:
    return cv2.invertAffineTransform(matrix.astype(np.float64)).astype(np.float32)


def transform_points(points: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Apply a 2x3 affine to (..., 2) points."""
    m = matrix.astype(np.float32)
    return points @ m[:, :2].T + m[:, 2]


def extent(points: np.ndarray) -> np.ndarray:
    """(x0, y0, x1, y1) float32 of an (N, 2) point set. Per column: `points.min(0)` on a (468, 2) array is
    a slower strided reduction, and tracking takes several extents per face and frame."""
    xs, ys = points[:, 0], points[:, 1]
    return np.array([xs.min(), ys.min(), xs.max(), ys.max()], dtype=np.float32)


def rotated_square(center: np.ndarray, side: float, angle_rad: float, out_size: int) -> np.ndarray:
    """Frame -> crop affine of a `side` px square centred on `center`, rotated by `angle_rad`, to out_size.

    The crop's x axis runs along `angle_rad` in the frame, so a face whose eye line has that angle comes out
    level (what FaceMesh expects).
    """
    scale = out_size / max(side, 1e-3)
    c, s = np.cos(angle_rad), np.sin(angle_rad)
    rot = np.array([[c, s], [-s, c]], dtype=np.float64) * scale
    t = np.array([out_size / 2.0, out_size / 2.0]) - rot @ center.astype(np.float64)
    return np.hstack([rot, t[:, None]]).astype(np.float32)
