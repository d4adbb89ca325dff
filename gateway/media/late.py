"""What to send when a frame was not processed in time (pure; the session applies it).

`repeat` (default): resend the last processed image, so an unswapped face never leaks; before the first
processed frame there is nothing safe to send and the frame is skipped. `original`: pass the input through.
A stale frame (replaced by a newer one of the same session) is never sent: its successor takes its place.

A repeat is only sent once the stream has gone `repeat_gap_s` without a frame (`repeat_due`). A viewer sees
the same thing either way (a player holds the last picture until the next one), but each repeat costs an
encode, packetizing and encryption, and repeats come exactly when the machine is out of CPU: at 640x360 with
8 publishers on 2 cores, 45 repeats/s were encoded for nothing a viewer could see. Past the gap (a stall)
the picture is repeated so receivers keep getting frames and keyframe requests are answered.
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
