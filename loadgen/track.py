"""The one video track every publisher here sends: the load generator's jobs, the benchmarks and the tests.

Frame N of a precomputed I420 loop (`loadgen.synth.FrameLoop`) leaves at N/fps on a `MediaClock` (shared with
an audio track when one is given), stamped with its id (`loadgen.stamp`) so it is recognised after the round
trip. Per frame it costs a copy and the stamp: the sender shares the machine with what it measures.
"""

from __future__ import annotations

import fractions
import time
from collections.abc import Callable, Sequence

import av
import numpy as np
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError

from loadgen.avsync import MediaClock, wait_due
from loadgen.synth import FrameLoop

VIDEO_CLOCK = 90_000


class StampedVideoTrack(MediaStreamTrack):
    """Sends frame N of `frames` at N/fps, stamped with N, and notes when each one left.

    Ids count from `first_id`. Send times go to `on_sent(id, t)` when given (a load job emits events and
    may run for hours), otherwise into `sent`. Far behind (a saturated machine) the clock re-anchors rather
    than bursting to catch up. `stamp=False` sends the pictures as they are (a benchmark that wants only the
    encoder's load).
    """

    kind = "video"

    def __init__(
        self,
        frames: FrameLoop,
        fps: float,
        *,
        clock: MediaClock | None = None,
        first_id: int = 0,
        on_sent: Callable[[int, float], None] | None = None,
        stamp: bool = True,
    ) -> None:
        super().__init__()
        self._frames = frames  # not `_loop`: the track's event emitter owns that name
        self.fps = fps
        self._clock = clock if clock is not None else MediaClock()
        self._first_id = first_id
        self._next_id = first_id
        self._on_sent = on_sent
        self._stamp = stamp
        self.sent: dict[int, float] = {}

    @classmethod
    def from_rgb(
        cls,
        images: Sequence[np.ndarray],
        fps: float = 15.0,
        *,
        clock: MediaClock | None = None,
        stamp: bool = True,
    ) -> StampedVideoTrack:
        """A loop of RGB pictures (all one size), converted to I420 once."""
        return cls(FrameLoop.from_rgb(images, fps), fps, clock=clock, stamp=stamp)

    async def recv(self) -> av.VideoFrame:
        if self.readyState != "live":
            raise MediaStreamError
        frame_id = self._next_id
        self._next_id += 1
        frame = self._frames.frame(frame_id) if self._stamp else self._frames.plain(frame_id)
        media_s = (frame_id - self._first_id) / self.fps
        await wait_due(self._clock, media_s)
        frame.pts = int(round(media_s * VIDEO_CLOCK))
        frame.time_base = fractions.Fraction(1, VIDEO_CLOCK)
        sent_at = time.monotonic()
        if self._on_sent is not None:
            self._on_sent(frame_id, sent_at)
        else:
            self.sent[frame_id] = sent_at
        return frame
