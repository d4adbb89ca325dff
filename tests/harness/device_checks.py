"""Checks the device image path's tests share (CPU torch in tests/unit, CUDA in tests/gpu): a processed frame
changed only inside its reported boxes, and the I420 planes the device made for them."""

from __future__ import annotations

import numpy as np

from engines.frames import FrameOutput, even_box
from gateway.media.colour import rgb_to_i420


def changed_only_in_boxes(frame: np.ndarray, want: FrameOutput, got: FrameOutput) -> np.ndarray:
    """Same boxes, nothing outside them changed, something inside changed; the differences inside."""
    assert want.changed and got.changed == want.changed
    outside = np.ones(frame.shape[:2], bool)
    for x0, y0, x1, y1 in want.changed:
        outside[y0:y1, x0:x1] = False
    assert (got.image[outside] == frame[outside]).all()
    assert got.image is not frame and (got.image[~outside] != frame[~outside]).any()
    return np.abs(got.image.astype(np.int16) - want.image.astype(np.int16))[~outside]


def i420_made_on_the_device(out: FrameOutput) -> None:
    """The changed boxes' I420 planes came with the frame, each within 1 of the host's conversion."""
    assert out.changed and out.changed_i420 is not None and len(out.changed_i420) == len(out.changed)
    h, w = out.image.shape[:2]
    for box, planes in zip(out.changed, out.changed_i420, strict=True):
        x0, y0, x1, y1 = even_box(box, w, h)  # type: ignore[misc]
        want = rgb_to_i420(np.ascontiguousarray(out.image[y0:y1, x0:x1]))
        assert planes is not None and want is not None and planes.shape == want.shape
        assert np.abs(planes.astype(int) - want.astype(int)).max() <= 1
