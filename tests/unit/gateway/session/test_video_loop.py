"""A session's decoded frames become RGB through one converter: no libswscale threads started per frame."""

from __future__ import annotations

import os
from pathlib import Path

import av
import numpy as np
import pytest
from av.video.reformatter import VideoReformatter

from gateway.session.video_loop import _to_rgb

TASKS = Path("/proc/self/task")


@pytest.mark.skipif(not TASKS.exists(), reason="counts threads through /proc")
def test_a_thousand_frames_start_threads_once_not_per_frame() -> None:
    rng = np.random.default_rng(3)
    i420 = rng.integers(0, 256, (360, 320), dtype=np.uint8)  # 320x240 yuv420p planes, as decoded
    converter = VideoReformatter()
    started: set[str] = set()
    for _ in range(1000):
        frame = av.VideoFrame.from_ndarray(i420, format="yuv420p")  # a new frame each time, as decoded
        before = set(os.listdir(TASKS))
        rgb = _to_rgb(converter, frame)
        started |= set(os.listdir(TASKS)) - before
    assert len(started) <= (os.cpu_count() or 1) + 1  # the converter's own pool, once (was 2 per frame here)
    assert np.array_equal(rgb, frame.to_ndarray(format="rgb24"))  # the same picture as before
    assert rgb.shape == (240, 320, 3)
