"""The output side's I420: the decoded planes, with only the pipeline's changed boxes converted back.

Real VP8-decoded frames of a real photograph, at the sizes a stream takes (480x270: a chroma plane does not
fill whole rows; 322x242: the chroma width is odd); a real pipeline's `FrameOutput.changed`; the real encoder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from fractions import Fraction

import av
import cv2
import numpy as np
import pytest

from engines.frames import STAGE_SWAP, FrameItem, FrameOutput, SourceFace
from engines.models.store import ModelStore
from engines.pipeline import Pipeline, PipelineConfig
from gateway.media.colour import rgb_to_i420
from gateway.media.fanout import FanoutEncoder
from gateway.media.planes import decoded_i420, even_box, patched_i420
from gateway.sessions import _encode, _Pending, _yuv_source

SIZES = [(320, 240), (480, 270), (322, 242), (640, 360)]


def _decoded(rgb: np.ndarray) -> av.VideoFrame:
    """`rgb` through a real VP8 encode and decode, as the gateway receives a frame."""
    h, w = rgb.shape[:2]
    enc = av.CodecContext.create("libvpx", "w")
    enc.width, enc.height, enc.pix_fmt, enc.bit_rate = w, h, "yuv420p", 1_000_000  # type: ignore[attr-defined]
    enc.time_base = Fraction(1, 90000)
    dec = av.CodecContext.create("vp8", "r")
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24").reformat(format="yuv420p")
    frame.pts = 0
    out = [f for p in [*enc.encode(frame), *enc.encode(None)] for f in dec.decode(p)]  # type: ignore[attr-defined]
    assert len(out) == 1
    return out[0]  # type: ignore[no-any-return]


def _plane_arrays(i420: np.ndarray, w: int, h: int) -> list[np.ndarray]:
    flat = i420.reshape(-1).astype(np.int16)
    n_y, n_c = w * h, (w // 2) * (h // 2)
    return [flat[:n_y].reshape(h, w), flat[n_y:n_y + n_c].reshape(h // 2, w // 2),
            flat[n_y + n_c:].reshape(h // 2, w // 2)]


@pytest.mark.parametrize("size", SIZES)
def test_decoded_planes_are_the_frames_own(astronaut: np.ndarray, size: tuple[int, int]) -> None:
    frame = _decoded(cv2.resize(astronaut, size, interpolation=cv2.INTER_AREA))
    i420 = decoded_i420(frame)
    assert i420 is not None and i420.shape == (size[1] * 3 // 2, size[0]) and i420.dtype == np.uint8
    for mine, plane in zip(_plane_arrays(i420, *size), frame.planes, strict=True):
        theirs = np.frombuffer(memoryview(plane), np.uint8).reshape(plane.height, plane.line_size)
        assert np.array_equal(mine, theirs[:, : plane.width])


def test_odd_sizes_and_other_formats_have_no_planes() -> None:
    assert decoded_i420(av.VideoFrame(321, 240, "yuv420p")) is None
    assert decoded_i420(av.VideoFrame(320, 241, "yuv420p")) is None
    assert decoded_i420(av.VideoFrame(320, 240, "rgb24")) is None


def test_even_box_takes_whole_chroma_blocks() -> None:
    assert even_box((3, 5, 10, 11), 320, 240) == (2, 4, 10, 12)
    assert even_box((-4, -1, 400, 300), 320, 240) == (0, 0, 320, 240)
    assert even_box((319, 239, 320, 240), 320, 240) == (318, 238, 320, 240)
    assert even_box((100, 50, 100, 60), 320, 240) is None


@pytest.mark.parametrize("size", SIZES)
def test_changed_boxes_are_converted_the_rest_is_the_decoded_picture(astronaut: np.ndarray,
                                                                     size: tuple[int, int]) -> None:
    w, h = size
    frame = _decoded(cv2.resize(astronaut, size, interpolation=cv2.INTER_AREA))
    base = decoded_i420(frame)
    assert base is not None
    kept = base.copy()
    rgb = frame.to_ndarray(format="rgb24")
    edited = rgb.copy()
    boxes = [(33, 21, 97, 140), (90, 101, w - 7, h - 3)]  # odd corners, overlapping, touching the edge
    for x0, y0, x1, y1 in boxes:
        edited[y0:y1, x0:x1] = 255 - edited[y0:y1, x0:x1]

    out = patched_i420(base, edited, boxes)
    assert np.array_equal(base, kept)  # the decoded planes may be sent again: never written
    whole = _plane_arrays(rgb_to_i420(edited), w, h)  # type: ignore[arg-type]
    got, before = _plane_arrays(out, w, h), _plane_arrays(base, w, h)
    inside = np.zeros((h, w), bool)
    for box in boxes:
        x0, y0, x1, y1 = even_box(box, w, h)  # type: ignore[misc]
        inside[y0:y1, x0:x1] = True
    inside_c = inside[::2, ::2]
    for plane, (g, whole_p, b) in enumerate(zip(got, whole, before, strict=True)):
        mask = inside if plane == 0 else inside_c
        assert np.array_equal(g[mask], whole_p[mask]), plane  # exactly the whole-frame conversion
        assert np.array_equal(g[~mask], b[~mask]), plane      # bit for bit the decoded picture
    # and the picture is the edited one: back in RGB it is as close to `edited` as the whole conversion
    back = av.VideoFrame.from_ndarray(out, format="yuv420p").to_ndarray(format="rgb24")
    assert cv2.PSNR(back, edited) > 35.0


def test_nothing_changed_is_the_base_itself(astronaut: np.ndarray) -> None:
    frame = _decoded(cv2.resize(astronaut, (320, 240), interpolation=cv2.INTER_AREA))
    base = decoded_i420(frame)
    assert base is not None
    assert patched_i420(base, frame.to_ndarray(format="rgb24"), ()) is base
    with pytest.raises(ValueError, match="do not fit"):
        patched_i420(base, np.zeros((360, 640, 3), np.uint8), [(0, 0, 10, 10)])


def test_encoder_sends_the_planes_it_is_given() -> None:
    """With `i420` the encoder encodes those planes and never looks at the RGB (no second conversion)."""
    enc = FanoutEncoder()
    enc.subscribe()
    grey = np.full((240, 320, 3), 128, np.uint8)
    white = rgb_to_i420(np.full((240, 320, 3), 235, np.uint8))
    dec = av.CodecContext.create("vp8", "r")
    frames = [f for p in enc.encode(grey, 0, white) for f in dec.decode(av.Packet(bytes(p)))]
    assert len(frames) == 1
    assert abs(float(frames[0].to_ndarray(format="rgb24").mean()) - 235.0) < 3.0


@pytest.fixture(scope="module")
def swap_pipeline(model_store: ModelStore) -> Iterator[Pipeline]:
    p = Pipeline.from_config(PipelineConfig(processors=(STAGE_SWAP,)), model_store)
    yield p
    p.close()


def test_pipeline_reports_where_it_changed_the_frame(swap_pipeline: Pipeline, astronaut: np.ndarray,
                                                     group_photo: np.ndarray) -> None:
    source: SourceFace = swap_pipeline.prepare_source(astronaut, "astronaut")
    small = cv2.resize(group_photo, (640, 443))
    grey = np.full((240, 320, 3), 120, np.uint8)
    out = swap_pipeline.process([FrameItem(small, source), FrameItem(grey, source), FrameItem(small, None)])
    swapped, empty, untouched = out
    assert swapped.faces == 6 and swapped.changed is not None and len(swapped.changed) == 6
    outside = np.ones(small.shape[:2], bool)
    for x0, y0, x1, y1 in swapped.changed:
        outside[y0:y1, x0:x1] = False
    diff = np.any(swapped.image != small, axis=2)
    assert diff.any() and not diff[outside].any()  # every change lies inside the reported boxes
    assert empty.changed == () and empty.image is grey
    assert untouched.changed == () and untouched.image is small


def test_session_builds_i420_from_what_it_knows(astronaut: np.ndarray) -> None:
    """Which planes the output loop starts from, for each thing the late policy can send."""
    frame = _decoded(cv2.resize(astronaut, (320, 240), interpolation=cv2.INTER_AREA))
    rgb, planes = frame.to_ndarray(format="rgb24"), decoded_i420(frame)
    loop = asyncio.new_event_loop()
    try:
        pending = _Pending(0, 0.0, 0, rgb, 1.0, loop.create_future(), planes)
    finally:
        loop.close()
    edited = rgb.copy()
    edited[10:20, 10:20] = 0
    boxes = ((10, 10, 20, 20),)
    last, last_planes = rgb.copy(), rgb_to_i420(rgb)
    assert _yuv_source(edited, pending, FrameOutput(edited, 1, changed=boxes), None, None) == (planes, boxes)
    assert _yuv_source(edited, pending, FrameOutput(edited, 1), None, None) == (None, None)  # not known
    assert _yuv_source(rgb, pending, None, last, last_planes) == (planes, ())               # `original`
    assert _yuv_source(last, pending, None, last, last_planes) == (last_planes, ())         # `repeat`
    assert _yuv_source(last, pending, None, last, None) == (None, None)
    assert _yuv_source(None, pending, None, last, last_planes) == (None, None)

    enc = FanoutEncoder()
    enc.subscribe()
    i420, packets = _encode([enc], edited, planes, boxes, 0)
    assert i420 is not None and len(packets) == 1 and packets[0]
    assert np.array_equal(i420, patched_i420(planes, edited, boxes))  # type: ignore[arg-type]
    resized = cv2.resize(edited, (640, 480))
    i420, _ = _encode([enc], resized, planes, boxes, 6000)  # planes of another size: whole conversion
    assert i420 is not None and np.array_equal(i420, rgb_to_i420(resized))  # type: ignore[arg-type]
    assert _encode([], edited, planes, boxes, 12000) == (None, [])


def _round_trip_psnr(frames: list[np.ndarray], noise: int) -> float:
    enc = FanoutEncoder(bitrate=1_000_000, vp8_noise_sensitivity=noise)
    enc.subscribe()
    dec = av.CodecContext.create("vp8", "r")
    psnr = []
    for i, img in enumerate(frames):
        for packet in enc.encode(img, i * 6000):
            for frame in dec.decode(av.Packet(bytes(packet))):
                psnr.append(cv2.PSNR(frame.to_ndarray(format="rgb24"), img))
    assert len(psnr) == len(frames)
    return float(np.mean(psnr))


def test_denoiser_off_keeps_the_picture_closer(astronaut: np.ndarray) -> None:
    """The frames the gateway encodes were encoded once already: the denoiser only smears them."""
    base = cv2.resize(astronaut, (380, 240), interpolation=cv2.INTER_AREA)
    frames = [np.ascontiguousarray(base[:, 2 * k: 2 * k + 320]) for k in range(30)]
    assert FanoutEncoder.VP8_NOISE_SENSITIVITY == 0
    assert _round_trip_psnr(frames, 0) >= _round_trip_psnr(frames, 4)
    with pytest.raises(ValueError, match="noise_sensitivity"):
        FanoutEncoder(vp8_noise_sensitivity=7)
