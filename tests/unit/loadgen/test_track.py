"""The one stamped video track: ids in the pixels from `first_id`, pts on the 90 kHz clock, pictures looped in
order, send times noted, and the pictures unchanged without a stamp."""

from __future__ import annotations

import asyncio

import av
import numpy as np
import pytest
from aiortc.mediastreams import MediaStreamError

from loadgen.stamp import read_stamp
from loadgen.synth import FrameLoop
from loadgen.track import StampedVideoTrack


def _pictures() -> list[np.ndarray]:
    return [np.full((120, 160, 3), value, np.uint8) for value in (40, 200)]


def _luma(frame: av.VideoFrame) -> np.ndarray:
    return frame.to_ndarray(format="yuv420p")[: frame.height]


def test_frames_carry_their_ids_and_pictures_in_order() -> None:
    async def run() -> tuple[list[av.VideoFrame], StampedVideoTrack]:
        track = StampedVideoTrack.from_rgb(_pictures(), fps=100.0)
        return [await track.recv() for _ in range(4)], track

    frames, track = asyncio.run(run())
    assert [read_stamp(_luma(f)) for f in frames] == [0, 1, 2, 3]
    assert [f.pts for f in frames] == [0, 900, 1800, 2700]
    means = [float(_luma(f)[:40].mean()) for f in frames]
    assert means[0] < means[1] and means[2] < means[3] and means[0] == means[2]
    assert sorted(track.sent) == [0, 1, 2, 3]
    assert list(track.sent.values()) == sorted(track.sent.values())


def test_a_load_job_counts_from_one_and_hears_each_send() -> None:
    heard: list[int] = []

    async def run() -> list[av.VideoFrame]:
        loop = FrameLoop.from_rgb(_pictures(), 100.0)
        job = StampedVideoTrack(loop, 100.0, first_id=1, on_sent=lambda i, _at: heard.append(i))
        return [await job.recv() for _ in range(3)]

    frames = asyncio.run(run())
    assert [read_stamp(_luma(f)) for f in frames] == heard == [1, 2, 3]
    assert [f.pts for f in frames] == [0, 900, 1800]


def test_unstamped_frames_are_the_pictures_and_a_stopped_track_ends() -> None:
    async def run() -> av.VideoFrame:
        track = StampedVideoTrack.from_rgb(_pictures(), fps=100.0, stamp=False)
        frame = await track.recv()
        track.stop()
        with pytest.raises(MediaStreamError):
            await track.recv()
        return frame

    frame = asyncio.run(run())
    assert read_stamp(_luma(frame)) is None
    luma = _luma(frame)
    assert luma.min() == luma.max()
