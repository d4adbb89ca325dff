"""One session's marking of its output frames (in the encode's worker thread, on the I420 frame that every
codec encodes, so the mark is written once per frame whatever the number of consumers).

The payload's time code turns once a minute; the layers (a key's Hadamard rows) are made once per session.
A frame the loop encodes again (a repeat) keeps the mark it has: `mark` is told whether its frame was
marked already.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import av
import numpy as np

from engines.marking.embed import Embedder
from engines.marking.pattern import Payload, coefficients, key_id, nominal, session_code, time_code
from gateway.marking.config import MarkingConfig
from gateway.media.planes import copied, plane_views


class FrameMarker:
    """Marks a session's I420 frames (a copy where the frame is not the loop's own)."""

    def __init__(
        self, config: MarkingConfig, session_id: str, clock: Callable[[], float] = time.time
    ) -> None:
        self._key = config.key
        self._session_code = None if config.key is None else session_code(config.key, session_id)
        self._clock = clock
        self._minute: int | None = None
        self._embedder: Embedder | None = None
        self.frames_marked = 0

    @property
    def session_code(self) -> int | None:
        return self._session_code

    def payload(self) -> Payload | None:
        if self._key is None or self._session_code is None:
            return None
        return Payload(key_id(self._key), self._session_code, time_code(self._clock()))

    def _current(self) -> Embedder:
        minute = int(self._clock() // 60)
        if self._embedder is None:
            self._embedder = Embedder(*coefficients(self._key, self.payload()))
        elif minute != self._minute:  # the time code turned: new bits, the same layers
            self._embedder.renew(nominal(self._key, self.payload()))
        self._minute = minute
        return self._embedder

    def mark(self, frame: av.VideoFrame, owned: bool, keyframe: bool = False) -> av.VideoFrame:
        """`frame` marked: written in place when `owned` (made for this encode), else a marked copy.
        `keyframe`: an encoder will make this frame a keyframe (its start keeps about half of the mark, so
        the mark starts stronger again: `embed.start_gain`)."""
        if not owned:
            frame = copied(frame)
        embedder = self._current()
        if keyframe:
            embedder.restart()
        embedder.mark(plane_views(frame)[0])
        self.frames_marked += 1
        return frame

    def mark_rgb(self, image: np.ndarray) -> np.ndarray:
        """An odd-sized picture (no I420 frame of its own): the luma change added to each of R, G and B."""
        y = (image[..., :3].astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)).astype(np.uint8)
        delta = self._current().delta(y)
        self.frames_marked += 1
        return np.clip(image.astype(np.float32) + delta[..., None], 0, 255).astype(np.uint8)

    def stats(self) -> dict[str, object]:
        return {
            "mark": True,
            "key_id": None if self._key is None else key_id(self._key),
            "session_code": self._session_code,
            "frames_marked": self.frames_marked,
        }
