"""RGB -> I420 for the encoder: the fast path must give the frames the old libswscale path gave, or better.

Compared on a real photograph (the astronaut) at the sizes a stream takes (including 480x270, where a chroma
plane does not fill whole rows, and 322x242, where its width is odd), and end to end through the real VP8
encoder and decoder.
"""

from __future__ import annotations

from fractions import Fraction

import av
import cv2
import numpy as np
import pytest

from gateway.media import fanout
from gateway.media.colour import rgb_to_i420
from gateway.media.fanout import FanoutEncoder

SIZES = [(320, 240), (480, 270), (322, 242), (640, 360)]


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 99.0 if mse == 0 else 10.0 * np.log10(255.0**2 / mse)


def _planes(frame: av.VideoFrame) -> list[np.ndarray]:
    out = []
    for p in frame.planes:
        arr = np.frombuffer(memoryview(p), np.uint8).reshape(p.height, p.line_size)
        out.append(arr[:, : p.width].astype(np.int16))
    return out


def _swscale(rgb: np.ndarray) -> av.VideoFrame:
    return av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24").reformat(format="yuv420p")


@pytest.mark.parametrize("size", SIZES)
def test_planes_match_libswscale(astronaut: np.ndarray, size: tuple[int, int]) -> None:
    rgb = cv2.resize(astronaut, size, interpolation=cv2.INTER_AREA)
    i420 = rgb_to_i420(rgb)
    assert i420 is not None and i420.shape == (size[1] * 3 // 2, size[0])
    new, old = _planes(av.VideoFrame.from_ndarray(i420, format="yuv420p")), _planes(_swscale(rgb))
    assert [p.shape for p in new] == [p.shape for p in old]
    assert np.abs(new[0] - old[0]).max() <= 1  # luma: the same BT.601 limited-range transform
    for n, o in zip(new[1:], old[1:], strict=True):  # chroma: a box filter vs libswscale's filter
        assert np.abs(n - o).mean() < 0.5 and np.abs(n - o).max() <= 12


@pytest.mark.parametrize("size", SIZES)
def test_back_in_rgb_at_least_as_close_to_the_source(astronaut: np.ndarray, size: tuple[int, int]) -> None:
    rgb = cv2.resize(astronaut, size, interpolation=cv2.INTER_AREA)
    i420 = rgb_to_i420(rgb)
    assert i420 is not None
    new = av.VideoFrame.from_ndarray(i420, format="yuv420p").to_ndarray(format="rgb24")
    old = _swscale(rgb).to_ndarray(format="rgb24")
    assert _psnr(new, rgb) >= _psnr(old, rgb) - 0.05
    assert _psnr(new, old) > 38.0


def test_odd_sizes_and_other_inputs_are_left_to_the_caller() -> None:
    assert rgb_to_i420(np.zeros((241, 320, 3), np.uint8)) is None
    assert rgb_to_i420(np.zeros((240, 321, 3), np.uint8)) is None
    assert rgb_to_i420(np.zeros((240, 320, 3), np.float32)) is None
    strided = np.zeros((240, 640, 3), np.uint8)[:, ::2]  # a non-contiguous view is fine
    assert rgb_to_i420(strided) is not None


def _vp8_round_trip(frames: list[np.ndarray], cpu_used: int = FanoutEncoder.VP8_CPU_USED) -> list[np.ndarray]:
    enc = FanoutEncoder(bitrate=1_000_000, vp8_cpu_used=cpu_used)
    enc.subscribe()
    dec = av.CodecContext.create("libvpx", "r")
    out: list[np.ndarray] = []
    for i, img in enumerate(frames):
        for packet in enc.encode(img, i * 6000):
            for frame in dec.decode(av.Packet(bytes(packet))):
                out.append(frame.to_ndarray(format="rgb24"))
    return out


@pytest.mark.parametrize("size", [(320, 240), (480, 270)])
def test_encoded_stream_quality_does_not_drop(
    astronaut: np.ndarray, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same 30 moving frames through the real VP8 encoder, fast conversion vs the libswscale path."""
    base = cv2.resize(astronaut, (size[0] + 60, size[1]), interpolation=cv2.INTER_AREA)
    frames = [np.ascontiguousarray(base[:, 2 * k : 2 * k + size[0]]) for k in range(30)]
    fast = _vp8_round_trip(frames)
    monkeypatch.setattr(fanout, "rgb_to_i420", lambda image: None)  # force the previous path
    slow = _vp8_round_trip(frames)
    assert len(fast) == len(slow) == len(frames)
    fast_psnr = np.mean([_psnr(f, s) for f, s in zip(fast, frames, strict=True)])
    slow_psnr = np.mean([_psnr(f, s) for f, s in zip(slow, frames, strict=True)])
    assert fast_psnr > 30.0 and fast_psnr >= slow_psnr - 0.2, (fast_psnr, slow_psnr)


@pytest.mark.parametrize("size", [(320, 240), (640, 360)])
def test_whole_encode_path_not_worse_than_before(
    astronaut: np.ndarray, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fast conversion + the faster VP8 setting vs what shipped before (libswscale + aiortc's cpu-used -6)."""
    base = cv2.resize(astronaut, (size[0] + 60, size[1]), interpolation=cv2.INTER_AREA)
    frames = [np.ascontiguousarray(base[:, 2 * k : 2 * k + size[0]]) for k in range(30)]
    now = _vp8_round_trip(frames)
    monkeypatch.setattr(fanout, "rgb_to_i420", lambda image: None)
    before = _vp8_round_trip(frames, cpu_used=-6)
    now_psnr = np.mean([_psnr(f, s) for f, s in zip(now, frames, strict=True)])
    before_psnr = np.mean([_psnr(f, s) for f, s in zip(before, frames, strict=True)])
    assert now_psnr >= before_psnr - 0.1, (now_psnr, before_psnr)


def test_vp8_speed_is_validated() -> None:
    with pytest.raises(ValueError, match="cpu_used"):
        FanoutEncoder(vp8_cpu_used=17)


def test_odd_sized_frames_still_encode() -> None:
    enc = FanoutEncoder()
    enc.subscribe()
    img = np.full((241, 321, 3), 90, np.uint8)
    packets = enc.encode(img, 0)
    assert packets and packets[0].is_keyframe
    assert Fraction(packets[0].time_base) == fanout.VIDEO_TIME_BASE
