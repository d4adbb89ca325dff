"""Keep the decoded frame and convert back to YUV only what the pipeline changed.

A face swap changes a few percent of the frame; converting all of it RGB -> I420 again costs time and rounds
every untouched pixel twice. A frame the pipeline did not change goes to the encoder as decoded (no
conversion, no copy); for a swapped one the decoded planes are copied once and only the changed boxes
(`FrameOutput.changed`), widened to even coordinates, are converted over them: inside, exactly what the
whole-frame conversion gives; outside, the decoded picture bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import av
import numpy as np

from engines.frames import Box, even_box
from gateway.media.colour import rgb_to_i420


def is_i420(frame: av.VideoFrame) -> bool:
    """Whether the frame's planes can be reused: 4:2:0 at an even size (odd sizes are converted from RGB)."""
    return frame.format.name == "yuv420p" and frame.width % 2 == 0 and frame.height % 2 == 0


def plane_views(frame: av.VideoFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Y (HxW), U and V (H/2 x W/2) numpy views of a yuv420p frame's own buffers (rows padded to the
    plane's line size are cut to its width); writing them writes the frame."""
    views = []
    for plane in frame.planes:
        rows = np.frombuffer(plane, np.uint8)[: plane.height * plane.line_size]  # type: ignore[call-overload]
        views.append(rows.reshape(plane.height, plane.line_size)[:, : plane.width])
    y, u, v = views
    return y, u, v


def copied(frame: av.VideoFrame) -> av.VideoFrame:
    """A yuv420p frame's own copy (to write on without touching the decoder's buffers)."""
    out = av.VideoFrame(frame.width, frame.height, "yuv420p")
    for d, s in zip(plane_views(out), plane_views(frame), strict=True):
        np.copyto(d, s)
    return out


def patched_frame(
    decoded: av.VideoFrame,
    image_rgb: np.ndarray,
    changed: Sequence[Box],
    regions: Sequence[np.ndarray | None] | None = None,
) -> av.VideoFrame:
    """A yuv420p frame of `image_rgb`, given the decoded frame it was made from and the boxes where it
    differs from that frame. Unchanged: `decoded` itself. `decoded` is never written (it may be sent again,
    and its buffers belong to the decoder). `regions`, one per box, are those boxes' I420 planes already
    made (`FrameOutput.changed_i420`, the device path's); they are written as they are, not converted."""
    height, width = image_rgb.shape[:2]
    if not is_i420(decoded) or (decoded.height, decoded.width) != (height, width):
        raise ValueError(
            f"decoded frame {decoded.width}x{decoded.height} {decoded.format.name} does not fit "
            f"a {width}x{height} image"
        )
    if not changed:
        return decoded
    out = av.VideoFrame(width, height, "yuv420p")
    dst = plane_views(out)
    for d, s in zip(dst, plane_views(decoded), strict=True):
        np.copyto(d, s)
    y, u, v = dst
    if regions is not None and len(regions) != len(changed):
        raise ValueError(f"{len(regions)} I420 regions for {len(changed)} changed boxes")
    for k, box in enumerate(changed):
        even = even_box(box, width, height)
        if even is None:
            continue
        x0, y0, x1, y1 = even
        rh, rw = y1 - y0, x1 - x0
        made = regions[k] if regions is not None else None
        region = made if made is not None else rgb_to_i420(np.ascontiguousarray(image_rgb[y0:y1, x0:x1]))
        assert region is not None  # even size, uint8 RGB
        if region.shape != (rh * 3 // 2, rw):
            raise ValueError(f"I420 region {region.shape} does not fit box {even}")
        flat, n_c = region.reshape(-1), (rh // 2) * (rw // 2)
        y[y0:y1, x0:x1] = region[:rh]
        u[y0 // 2 : y1 // 2, x0 // 2 : x1 // 2] = flat[rh * rw : rh * rw + n_c].reshape(rh // 2, rw // 2)
        v[y0 // 2 : y1 // 2, x0 // 2 : x1 // 2] = flat[rh * rw + n_c :].reshape(rh // 2, rw // 2)
    return out
