"""Which faces of a frame get swapped: all, the largest, or the one most like a reference face.

A live streamer does not want their guests swapped. `one` sticks to the face it chose while that face's
track lives (two faces of similar size must not trade places frame to frame); `reference` compares ArcFace
embeddings (cosine similarity) and swaps the best match above `min_similarity`, or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MIN_SIMILARITY = 0.3  # cosine similarity of ArcFace w600k embeddings; same person is typically >= 0.4


def largest(areas: Sequence[float]) -> int:
    return int(np.argmax(np.asarray(areas))) if len(areas) else -1


def select_one(areas: Sequence[float], ids: Sequence[int | None], sticky_id: int | None) -> list[int]:
    """Index of the face to swap: the previously chosen track while it is present, else the largest."""
    if not areas:
        return []
    if sticky_id is not None and sticky_id in ids:
        return [list(ids).index(sticky_id)]
    return [largest(areas)]


def select_reference(similarities: Sequence[float], min_similarity: float = MIN_SIMILARITY) -> list[int]:
    """Index of the face most like the reference, if it is like it at all."""
    if not similarities:
        return []
    best = int(np.argmax(np.asarray(similarities)))
    return [best] if similarities[best] >= min_similarity else []
