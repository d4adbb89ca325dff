"""What to send when a frame was not processed in time (pure; the session applies it).

`repeat` (default): resend the last processed image, so an unswapped face never leaks; before the first
processed frame there is nothing safe to send and the frame is skipped. `original`: pass the input through.
A stale frame (replaced by a newer one of the same session) is never sent: its successor takes its place.
"""

from __future__ import annotations

from enum import StrEnum

import cv2
import numpy as np

from gateway.monitoring.records import Outcome


class LatePolicy(StrEnum):
    REPEAT = "repeat"
    ORIGINAL = "original"


def choose_output(
    outcome: Outcome,
    processed: np.ndarray | None,
    original: np.ndarray,
    last_processed: np.ndarray | None,
    policy: LatePolicy,
) -> np.ndarray | None:
    """The image to encode for this frame, or None to send nothing. Always at the input's size."""
    if outcome is Outcome.PROCESSED and processed is not None:
        return fit(processed, original.shape)
    if outcome is Outcome.DROPPED_STALE:
        return None
    if policy is LatePolicy.ORIGINAL:
        return original
    if last_processed is None:
        return None
    return fit(last_processed, original.shape)


def fit(image: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Resize `image` to `shape` (H, W, C) when the stream's resolution changed; frames keep their size."""
    if image.shape[:2] == shape[:2]:
        return image
    return cv2.resize(image, (shape[1], shape[0]), interpolation=cv2.INTER_LINEAR)
