"""What to send when a frame was not processed in time (pure; the video loop applies it).

`repeat` (default): the last processed image, so an unswapped face never leaks (nothing before the first
one); `original`: the input. A stale frame is never sent: its successor takes its place. A repeat goes out
only once the stream has gone `repeat_gap_s` without a frame (`repeat_due`): a player holds the last picture
anyway, and each repeat costs an encode exactly when CPU is shortest; past the gap, receivers keep getting
frames and keyframe requests are answered.
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


def repeat_due(outcome: Outcome, since_sent_s: float | None, gap_s: float) -> bool:
    """Whether an unprocessed frame's repeat is worth sending: only after `gap_s` with nothing sent (a stall;
    0 = repeat every such frame). `since_sent_s` is None before anything was sent."""
    if outcome is Outcome.PROCESSED:
        return True
    return since_sent_s is None or since_sent_s >= gap_s
