"""A session's marker across the payload's minute: the frames after it carry the new time code, marked as a
marker made afresh for that minute marks them, while the layers' work is kept from the first frame. An
encoder's keyframe starts the mark stronger again, and the encoder says when one is due."""

from __future__ import annotations

import av
import numpy as np

from engines.marking.embed import START_FRAMES, Embedder
from engines.marking.pattern import Payload, coefficients, key_id, session_code, time_code
from gateway.marking.config import MarkingConfig
from gateway.marking.frame_marker import FrameMarker
from gateway.media.fanout import FanoutEncoder
from gateway.media.planes import plane_views

KEY = bytes(range(32))


def _frame(seed: int) -> av.VideoFrame:
    rng = np.random.default_rng(seed)
    i420 = rng.integers(40, 220, (360 * 3 // 2, 640), dtype=np.uint8)
    return av.VideoFrame.from_ndarray(i420, format="yuv420p")


def _luma(frame: av.VideoFrame) -> np.ndarray:
    return plane_views(frame)[0].copy()


def test_the_minute_turns_the_payload_not_the_layers() -> None:
    now = [600.0]
    marker = FrameMarker(MarkingConfig(key=KEY), "session-1", clock=lambda: now[0])
    marker.mark(_frame(0), owned=False)
    layers_work = marker._current()
    now[0] = 661.0  # the next minute
    frame = _frame(1)
    expected = _luma(frame)
    payload = Payload(key_id(KEY), session_code(KEY, "session-1"), time_code(661.0))
    Embedder(*coefficients(KEY, payload)).mark(expected)
    assert np.array_equal(_luma(marker.mark(frame, owned=False)), expected)
    assert marker._current() is layers_work  # renewed in place: no second build of the layers
    assert marker.payload() == payload


def test_without_a_key_the_public_layer_alone_every_minute() -> None:
    now = [0.0]
    marker = FrameMarker(MarkingConfig(), "session-2", clock=lambda: now[0])
    marker.mark(_frame(2), owned=False)
    now[0] = 125.0
    frame = _frame(3)
    expected = _luma(frame)
    Embedder(*coefficients(None, None)).mark(expected)
    assert np.array_equal(_luma(marker.mark(frame, owned=False)), expected)


def _soft_frame() -> av.VideoFrame:
    """A soft picture: the mark's cap leaves room for the stronger start."""
    yy, xx = np.mgrid[0 : 360 * 3 // 2, 0:640]
    i420 = (60 + 100 * xx / 640 + 20 * np.sin(yy / 9.0)).astype(np.uint8)
    return av.VideoFrame.from_ndarray(i420, format="yuv420p")


def _change(marker: FrameMarker, keyframe: bool) -> float:
    frame = _soft_frame()
    before = _luma(frame).astype(np.float64)
    return float(np.sqrt(np.mean((_luma(marker.mark(frame, owned=False, keyframe=keyframe)) - before) ** 2)))


def test_a_keyframe_starts_the_mark_stronger_again() -> None:
    marker = FrameMarker(MarkingConfig(key=KEY), "session-3", clock=lambda: 0.0)
    start = _change(marker, keyframe=True)
    settled = [_change(marker, keyframe=False) for _ in range(3 * START_FRAMES)][-1]
    assert start > 1.5 * settled  # the encoder's first frames keep about half of it
    assert _change(marker, keyframe=True) == start  # a viewer's keyframe: the start again
    assert _change(marker, keyframe=False) == start  # and it holds over the frames after it


def test_the_encoder_says_when_its_next_frame_is_a_keyframe() -> None:
    encoder = FanoutEncoder(bitrate=300_000, codec="VP8")
    assert encoder.keyframe_due  # nothing encoded yet
    image = np.zeros((360, 640, 3), np.uint8)
    packets = encoder.encode(image, 0, _soft_frame())
    assert packets and packets[0].is_keyframe and not encoder.keyframe_due
    encoder.request_keyframe()  # a viewer joined
    assert encoder.keyframe_due
    packets = encoder.encode(image, 3000, _soft_frame())
    assert packets and packets[0].is_keyframe and not encoder.keyframe_due
