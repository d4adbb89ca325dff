"""RGB -> I420 (yuv420p) for the encoders, without libswscale's slow packed-RGB input path.

The pipeline's frames are RGB and the encoders take yuv420p; PyAV's reformat costs as much as a VP8 encode.
Luma comes from OpenCV's conversion (BT.601 limited range, as libswscale's) and chroma from the 2x2 block
mean of the RGB (`INTER_AREA` halving; the map is affine, so that is the mean of the converted pixels),
closer to the source than libswscale's filter (the unit tests compare both). Odd sizes are left to the
caller's libswscale path. Timings: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import cv2
import numpy as np

# BT.601 limited range ("studio swing"), what libswscale uses by default for rgb -> yuv420p. Rows: U, V.
_RGB_TO_UV = (
    np.array(
        [[-37.797, -74.203, 112.0, 128.0 * 255.0], [112.0, -93.786, -18.214, 128.0 * 255.0]], dtype=np.float32
    )
    / 255.0
)


def rgb_to_i420(image_rgb: np.ndarray) -> np.ndarray | None:
    """HxWx3 uint8 RGB -> (H*3/2)xW uint8 I420 planes (Y, then U, then V), or None for odd sizes."""
    h, w = image_rgb.shape[:2]
    if h % 2 or w % 2 or image_rgb.ndim != 3 or image_rgb.shape[2] != 3 or image_rgb.dtype != np.uint8:
        return None
    rgb = np.ascontiguousarray(image_rgb)
    out = cv2.cvtColor(rgb, cv2.COLOR_RGB2YUV_I420)  # luma is right; chroma is overwritten below
    half = cv2.resize(rgb, (w // 2, h // 2), interpolation=cv2.INTER_AREA)
    uv = cv2.transform(half, _RGB_TO_UV)
    quarter = h // 4 if h % 4 == 0 else None
    if quarter is not None:
        out[h : h + quarter] = uv[:, :, 0].reshape(quarter, w)
        out[h + quarter :] = uv[:, :, 1].reshape(quarter, w)
    else:  # H = 2 mod 4: a chroma plane does not fill whole rows of W; write it as one flat run
        flat = out[h:].reshape(-1)
        n = (h // 2) * (w // 2)
        flat[:n] = uv[:, :, 0].reshape(-1)
        flat[n:] = uv[:, :, 1].reshape(-1)
    return out
