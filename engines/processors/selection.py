"""Which faces of a frame get swapped: all, the largest, or the one most like a reference face.

A live streamer does not want their guests swapped. `one` sticks to the face it chose while that face's
track lives (two faces of similar size must not trade places frame to frame); `reference` compares ArcFace
embeddings (cosine similarity) and swaps the best match above `min_similarity`, or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engines.frames import FaceSettings, FaceTrack
from engines.processors.arcface import ArcFaceEmbedder
from engines.processors.face_detector import Face
from engines.processors.tracking import TrackedFace

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


class FaceSelector:
    """Applies a session's selector to a frame's faces. Holds only the shared (thread-safe) embedder; the
    per-session choice (`one`'s sticky track, each track's similarity) lives in the session's FaceTrack."""

    def __init__(self, embedder: ArcFaceEmbedder | None) -> None:
        self.embedder = embedder

    def select(
        self,
        image: np.ndarray,
        settings: FaceSettings,
        faces: list[Face],
        tracks: list[TrackedFace] | None,
        track: FaceTrack | None,
        reference: np.ndarray | None,
    ) -> list[Face]:
        """The faces to swap. `tracks` parallels `faces` (None for a stateless frame); `reference` is the
        reference face's embedding (None: nothing matches)."""
        if settings.selector == "many" or not faces:
            return faces
        if settings.selector == "one":
            ids: list[int | None] = [tf.id for tf in tracks] if tracks is not None else [None] * len(faces)
            sticky = track.selected_id if track is not None else None
            chosen = select_one([f.area for f in faces], ids, sticky)
            if track is not None and chosen:
                track.selected_id = ids[chosen[0]]
            return [faces[k] for k in chosen]
        return [faces[k] for k in select_reference(self.similarities(image, faces, tracks, reference))]

    def similarities(
        self,
        image: np.ndarray,
        faces: list[Face],
        tracks: list[TrackedFace] | None,
        reference: np.ndarray | None,
    ) -> list[float]:
        """Cosine similarity of each face to the reference; a track's is computed once, at its birth."""
        if self.embedder is None or reference is None:
            return [-1.0] * len(faces)  # no embedder: nothing matches (the gateway refuses such sessions)
        sims: list[float | None] = (
            [tf.similarity for tf in tracks] if tracks is not None else [None] * len(faces)
        )
        todo = [k for k, sim in enumerate(sims) if sim is None]
        if todo:
            emb = self.embedder.embed([(image, faces[k].kps5) for k in todo])
            for k, sim in zip(todo, emb @ reference, strict=True):
                sims[k] = float(sim)
                if tracks is not None:
                    tracks[k].similarity = float(sim)
        return [s if s is not None else -1.0 for s in sims]
