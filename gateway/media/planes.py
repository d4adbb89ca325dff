"""Keep the decoded picture's own I420 planes and convert back to YUV only what the pipeline changed.

Why: the pipeline works in RGB, the encoder takes I420, and a face swap changes only the face's box (a few
percent of a broadcast frame). Converting the whole processed frame RGB -> I420 again spends most of that
conversion on pixels nobody touched, and it is not even lossless for them: decode -> RGB -> I420 rounds every
pixel twice. So the session keeps the decoded frame's planes; for a frame the pipeline did not change (no
face, pass-through, `original` late policy) they go to the encoder as they are, and for a swapped frame only
the changed boxes (`FrameOutput.changed`, from `paste_back`) are converted and written over a copy of them.

Inside a changed box the result is exactly what the whole-frame conversion (`colour.rgb_to_i420`) gives: luma
is per pixel and chroma per 2x2 block, and the boxes are widened to even coordinates so no chroma block is
split. Outside the boxes it is the decoded picture, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import av
import numpy as np

from gateway.media.colour import rgb_to_i420

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 (exclusive), pixels


def decoded_i420(frame: av.VideoFrame) -> np.ndarray | None:
    """The decoded frame's I420 planes as one (H*3/2)xW uint8 array (Y, then U, then V, as `rgb_to_i420`
    lays them out), or None when the frame is not 4:2:0 or has an odd size (the caller converts from RGB)."""
    if frame.format.name != "yuv420p" or frame.width % 2 or frame.height % 2:
        return None
    return frame.to_ndarray(format="yuv420p")


def _views(i420: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Y (HxW), U and V (H/2 x W/2) views into a contiguous I420 array; writing them writes the array."""
    flat = i420.reshape(-1)
    n_y, n_c = height * width, (height // 2) * (width // 2)
    y = flat[:n_y].reshape(height, width)
    u = flat[n_y:n_y + n_c].reshape(height // 2, width // 2)
    v = flat[n_y + n_c:n_y + 2 * n_c].reshape(height // 2, width // 2)
    return y, u, v


def even_box(box: Box, width: int, height: int) -> Box | None:
    """`box` clipped to the frame and widened to even corners (whole chroma blocks); None when empty."""
    x0, y0, x1, y1 = box
    x0, y0 = max(0, x0 - x0 % 2), max(0, y0 - y0 % 2)
    x1, y1 = min(width, x1 + x1 % 2), min(height, y1 + y1 % 2)
    if x1 <= x0 or y1 <= y0:
        return None
    return x0, y0, x1, y1


def patched_i420(base: np.ndarray, image_rgb: np.ndarray, changed: Sequence[Box]) -> np.ndarray:
    """I420 of `image_rgb`, given `base` = the I420 of the picture it was made from, and the boxes where
    `image_rgb` differs from that picture. `base` is not modified (a decoded frame may be sent again)."""
    height, width = image_rgb.shape[:2]
    if base.shape != (height * 3 // 2, width) or height % 2 or width % 2:
        raise ValueError(f"base planes {base.shape} do not fit a {width}x{height} image")
    if not changed:
        return base
    out = np.array(base, copy=True, order="C")
    y, u, v = _views(out, height, width)
    for box in changed:
        even = even_box(box, width, height)
        if even is None:
            continue
        x0, y0, x1, y1 = even
        region = rgb_to_i420(np.ascontiguousarray(image_rgb[y0:y1, x0:x1]))
        assert region is not None  # even size, uint8 RGB
        ry, ru, rv = _views(region, y1 - y0, x1 - x0)
        y[y0:y1, x0:x1] = ry
        u[y0 // 2:y1 // 2, x0 // 2:x1 // 2] = ru
        v[y0 // 2:y1 // 2, x0 // 2:x1 // 2] = rv
    return out
