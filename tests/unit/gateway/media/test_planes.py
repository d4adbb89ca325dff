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

from engines.frames import STAGE_SWAP, FrameItem, FrameOutput, SourceFace, even_box
from engines.models.store import ModelStore
from engines.pipeline import Pipeline, PipelineConfig
from gateway.media.colour import rgb_to_i420
from gateway.media.fanout import FanoutEncoder
from gateway.media.planes import is_i420, patched_frame, plane_views
from gateway.session.video_loop import _encode, _Pending, _yuv_source

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


def _planes(frame: av.VideoFrame) -> list[np.ndarray]:
    return [p.astype(np.int16) for p in plane_views(frame)]


def _split(i420: np.ndarray, w: int, h: int) -> list[np.ndarray]:
    flat = i420.reshape(-1).astype(np.int16)
    n_y, n_c = w * h, (w // 2) * (h // 2)
    return [
        flat[:n_y].reshape(h, w),
        flat[n_y : n_y + n_c].reshape(h // 2, w // 2),
        flat[n_y + n_c :].reshape(h // 2, w // 2),
    ]


@pytest.mark.parametrize("size", SIZES)
def test_plane_views_are_the_frames_own_planes(astronaut: np.ndarray, size: tuple[int, int]) -> None:
    frame = _decoded(cv2.resize(astronaut, size, interpolation=cv2.INTER_AREA))
    assert is_i420(frame)
    views = plane_views(frame)
    assert [v.shape for v in views] == [(size[1], size[0])] + [(size[1] // 2, size[0] // 2)] * 2
    for mine, theirs in zip(views, _split(frame.to_ndarray(format="yuv420p"), *size), strict=True):
        assert np.array_equal(mine, theirs)


def test_odd_sizes_and_other_formats_are_not_reused() -> None:
    assert not is_i420(av.VideoFrame(321, 240, "yuv420p"))
    assert not is_i420(av.VideoFrame(320, 241, "yuv420p"))
    assert not is_i420(av.VideoFrame(320, 240, "rgb24"))


def test_even_box_takes_whole_chroma_blocks() -> None:
    assert even_box((3, 5, 10, 11), 320, 240) == (2, 4, 10, 12)
    assert even_box((-4, -1, 400, 300), 320, 240) == (0, 0, 320, 240)
    assert even_box((319, 239, 320, 240), 320, 240) == (318, 238, 320, 240)
    assert even_box((100, 50, 100, 60), 320, 240) is None


@pytest.mark.parametrize("size", SIZES)
def test_changed_boxes_are_converted_the_rest_is_the_decoded_picture(
    astronaut: np.ndarray, size: tuple[int, int]
) -> None:
    w, h = size
    frame = _decoded(cv2.resize(astronaut, size, interpolation=cv2.INTER_AREA))
    kept = _planes(frame)
    rgb = frame.to_ndarray(format="rgb24")
    edited = rgb.copy()
    boxes = [(33, 21, 97, 140), (90, 101, w - 7, h - 3)]  # odd corners, overlapping, touching the edge
    for x0, y0, x1, y1 in boxes:
        edited[y0:y1, x0:x1] = 255 - edited[y0:y1, x0:x1]

    out = patched_frame(frame, edited, boxes)
    assert out is not frame and (out.width, out.height, out.format.name) == (w, h, "yuv420p")
    assert all(np.array_equal(a, b) for a, b in zip(_planes(frame), kept, strict=True))  # never written
    whole = _split(rgb_to_i420(edited), w, h)  # type: ignore[arg-type]
    got = _planes(out)
    inside = np.zeros((h, w), bool)
    for box in boxes:
        x0, y0, x1, y1 = even_box(box, w, h)  # type: ignore[misc]
        inside[y0:y1, x0:x1] = True
    for plane, (g, whole_p, b) in enumerate(zip(got, whole, kept, strict=True)):
        mask = inside if plane == 0 else inside[::2, ::2]
        assert np.array_equal(g[mask], whole_p[mask]), plane  # exactly the whole-frame conversion
        assert np.array_equal(g[~mask], b[~mask]), plane  # bit for bit the decoded picture
    # and the picture is the edited one
    assert cv2.PSNR(out.to_ndarray(format="rgb24"), edited) > 35.0


def test_nothing_changed_is_the_decoded_frame_itself(astronaut: np.ndarray) -> None:
    frame = _decoded(cv2.resize(astronaut, (320, 240), interpolation=cv2.INTER_AREA))
    assert patched_frame(frame, frame.to_ndarray(format="rgb24"), ()) is frame
    with pytest.raises(ValueError, match="does not fit"):
        patched_frame(frame, np.zeros((360, 640, 3), np.uint8), [(0, 0, 10, 10)])


def test_encoder_sends_the_frame_it_is_given(astronaut: np.ndarray) -> None:
    """With `yuv` the encoder encodes that frame and never looks at the RGB (no second conversion); a
    decoded keyframe's own picture type does not force keyframes."""
    enc = FanoutEncoder()
    enc.subscribe()
    grey = np.full((240, 320, 3), 128, np.uint8)
    white = av.VideoFrame.from_ndarray(
        rgb_to_i420(np.full((240, 320, 3), 235, np.uint8)),  # type: ignore[arg-type]
        format="yuv420p",
    )
    dec = av.CodecContext.create("vp8", "r")
    first = enc.encode(grey, 0, white)
    frames = [f for p in first for f in dec.decode(av.Packet(bytes(p)))]
    assert len(frames) == 1 and first[0].is_keyframe
    assert abs(float(frames[0].to_ndarray(format="rgb24").mean()) - 235.0) < 3.0
    keyframe = _decoded(cv2.resize(astronaut, (320, 240), interpolation=cv2.INTER_AREA))
    assert keyframe.pict_type == av.video.frame.PictureType.I
    assert not any(p.is_keyframe for p in enc.encode(grey, 6000, keyframe))
    enc.request_keyframe()
    assert any(p.is_keyframe for p in enc.encode(grey, 12000, keyframe))


@pytest.fixture(scope="module")
def swap_pipeline(model_store: ModelStore) -> Iterator[Pipeline]:
    p = Pipeline.from_config(PipelineConfig(processors=(STAGE_SWAP,)), model_store)
    yield p
    p.close()


def test_pipeline_reports_where_it_changed_the_frame(
    swap_pipeline: Pipeline, astronaut: np.ndarray, group_photo: np.ndarray
) -> None:
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


def test_session_builds_yuv_from_what_it_knows(astronaut: np.ndarray) -> None:
    """Which frame the output loop starts from, for each thing the late policy can send."""
    frame = _decoded(cv2.resize(astronaut, (320, 240), interpolation=cv2.INTER_AREA))
    rgb = frame.to_ndarray(format="rgb24")
    loop = asyncio.new_event_loop()
    try:
        pending = _Pending(0, 0.0, 0, rgb, 1.0, loop.create_future(), frame)
    finally:
        loop.close()
    edited = rgb.copy()
    edited[10:20, 10:20] = 0
    boxes = ((10, 10, 20, 20),)
    last = rgb.copy()
    last_yuv = av.VideoFrame.from_ndarray(rgb_to_i420(last), format="yuv420p")  # type: ignore[arg-type]

    assert _yuv_source(edited, pending, FrameOutput(edited, 1, changed=boxes), None, None) == (frame, boxes)
    assert _yuv_source(edited, pending, FrameOutput(edited, 1), None, None) == (None, None)  # not known
    assert _yuv_source(rgb, pending, None, last, last_yuv) == (frame, ())  # `original`
    assert _yuv_source(last, pending, None, last, last_yuv) == (last_yuv, ())  # `repeat`
    assert _yuv_source(last, pending, None, last, None) == (None, None)
    assert _yuv_source(None, pending, None, last, last_yuv) == (None, None)

    enc = FanoutEncoder()
    enc.subscribe()
    yuv, packets, _ = _encode([enc], edited, frame, boxes, 0)
    assert yuv is not None and len(packets) == 1 and packets[0]
    expected = patched_frame(frame, edited, boxes)
    assert all(np.array_equal(a, b) for a, b in zip(plane_views(yuv), plane_views(expected), strict=True))
    assert _encode([enc], rgb, frame, (), 3000)[0] is frame  # unchanged: the decoded frame, no copy
    resized = cv2.resize(edited, (640, 480))
    yuv, _, _ = _encode([enc], resized, frame, boxes, 6000)  # a frame of another size: whole conversion
    assert yuv is not None and np.array_equal(yuv.to_ndarray(format="yuv420p"), rgb_to_i420(resized))  # type: ignore[arg-type]
    assert _encode([], edited, frame, boxes, 12000) == (None, [], 0.0)


def test_planes_the_device_made_are_written_as_given(astronaut: np.ndarray) -> None:
    """`FrameOutput.changed_i420` (the device path's planes of each even-widened box) replaces the host's
    conversion of those boxes, and the encode hop passes them on; planes that do not fit a box are refused."""
    w, h = 320, 240
    frame = _decoded(cv2.resize(astronaut, (w, h), interpolation=cv2.INTER_AREA))
    edited = frame.to_ndarray(format="rgb24")
    boxes = ((33, 21, 97, 140), (90, 100, 96, 100))  # the second is empty
    x0, y0, x1, y1 = even_box(boxes[0], w, h)  # type: ignore[misc]
    made = np.full(((y1 - y0) * 3 // 2, x1 - x0), 77, np.uint8)  # not what converting the RGB would give
    out = patched_frame(frame, edited, boxes, (made, None))
    y, u, v = plane_views(out)
    assert (y[y0:y1, x0:x1] == 77).all() and (u[y0 // 2 : y1 // 2, x0 // 2 : x1 // 2] == 77).all()
    assert (v[y0 // 2 : y1 // 2, x0 // 2 : x1 // 2] == 77).all()
    outside = np.ones((h, w), bool)
    outside[y0:y1, x0:x1] = False
    assert np.array_equal(y[outside], plane_views(frame)[0][outside])  # the decoded picture elsewhere
    enc = FanoutEncoder()
    enc.subscribe()
    yuv, _, _ = _encode([enc], edited, frame, boxes, 0, (made, None))
    assert yuv is not None and (plane_views(yuv)[0][y0:y1, x0:x1] == 77).all()
    with pytest.raises(ValueError, match="does not fit"):
        patched_frame(frame, edited, boxes, (made[:-2], None))
    with pytest.raises(ValueError, match="regions"):
        patched_frame(frame, edited, boxes, (made,))


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
    frames = [np.ascontiguousarray(base[:, 2 * k : 2 * k + 320]) for k in range(30)]
    assert FanoutEncoder.VP8_NOISE_SENSITIVITY == 0
    assert _round_trip_psnr(frames, 0) >= _round_trip_psnr(frames, 4)
    with pytest.raises(ValueError, match="noise_sensitivity"):
        FanoutEncoder(vp8_noise_sensitivity=7)
