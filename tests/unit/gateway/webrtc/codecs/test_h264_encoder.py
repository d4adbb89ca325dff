"""H.264 through libx264 itself (gateway.webrtc.codecs.libx264, gateway.webrtc.codecs.h264_encoder): the
binding's layout
probes, a rate change without a keyframe, the rate at the stream's own frame rate, no frame held back, the
same picture as FFmpeg's encoder at the same rate, and FanoutEncoder using it."""

from __future__ import annotations

from pathlib import Path

import av
import pytest

from gateway.media.fanout import FanoutEncoder
from gateway.webrtc.codecs import libx264
from gateway.webrtc.codecs.h264_encoder import H264Encoder
from tests.harness.encoded_stream import (
    TB,
    carphone,
    check_wrong_input_is_refused,
    fanout_keyframes,
    feed,
    kbps,
    keyframes_across_sizes,
    psnr,
)


@pytest.fixture(scope="module")
def lib() -> libx264.Libx264:
    found = libx264.load()
    assert found is not None, "PyAV's wheel bundles libx264: it must load"
    return found


@pytest.fixture(scope="module")
def clip(media: dict[str, Path]) -> list[av.VideoFrame]:
    return carphone(media["carphone_pristine.mp4"])


def test_the_bundled_library_loads_and_its_layouts_check(lib: libx264.Libx264) -> None:
    assert lib.build >= 150
    assert (lib.offsets.width, lib.offsets.height) == (28, 32)  # the head of x264_param_t, stable for years
    lib.check_layouts()


def test_a_library_whose_layout_differs_is_refused(
    lib: libx264.Libx264, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = lib.headers

    def swapped(handle: int) -> list[tuple[int, bytes]]:  # as if x264_nal_t's fields had moved
        return [(nal_type + 1, data) for nal_type, data in real(handle)]

    monkeypatch.setattr(lib, "headers", swapped)
    with pytest.raises(libx264.X264Error, match="layout differs"):
        lib.check_layouts()


def test_what_is_not_libx264_is_not_loaded(tmp_path: Path) -> None:
    not_a_library = tmp_path / "libx264.so.165"
    not_a_library.write_bytes(b"\x7fELF but not really")
    assert libx264.load([str(tmp_path / "missing.so"), str(not_a_library)]) is None
    assert libx264.load(["libc.so.6"]) is None  # a real library without x264's symbols


def test_a_new_rate_applies_at_once_without_a_keyframe(
    lib: libx264.Libx264, clip: list[av.VideoFrame]
) -> None:
    encoder = H264Encoder(lib, 320, 240, 1_000_000)
    packets = feed(encoder, clip, 0, 90, one_each=True)
    encoder.set_bitrate(250_000)
    packets += feed(encoder, clip, 90, 90, one_each=True)
    assert [i for i, p in packets if p.is_keyframe] == [0]
    assert 800 < kbps(packets, 30, 90) < 1200
    assert 190 < kbps(packets, 105, 180) < 310  # within half a second of the change
    assert encoder.bit_rate == 250_000
    packets = feed(encoder, clip, 180, 3, key_at=181, one_each=True)  # a keyframe only when asked
    assert [i for i, p in packets if p.is_keyframe] == [181]
    assert bytes(packets[1][1])[:5] == b"\x00\x00\x00\x01\x67"  # Annex B, SPS first on a keyframe
    assert all(p.time_base == TB and p.pts == i * 3000 for i, p in packets)
    encoder.close()
    encoder.close()  # idempotent


def test_a_cut_is_not_followed_by_the_old_rates_credit(
    lib: libx264.Libx264, clip: list[av.VideoFrame]
) -> None:
    """x264's rate estimate remembers seconds of the old rate; the VBV buffer's credit must not let it spend
    that on a link that has just been found too small."""
    drained = H264Encoder(lib, 320, 240, 700_000)
    kept = H264Encoder(lib, 320, 240, 700_000)
    kept.DRAIN_ON_CUT = False
    a, b = feed(drained, clip, 0, 60, one_each=True), feed(kept, clip, 0, 60, one_each=True)
    drained.set_bitrate(250_000)
    kept.set_bitrate(250_000)
    a += feed(drained, clip, 60, 30, one_each=True)
    b += feed(kept, clip, 60, 30, one_each=True)
    assert kbps(a, 60, 75) < 1.2 * 250 < kbps(b, 60, 75)  # the half second after the cut
    assert 190 < kbps(a, 75, 90) < 310
    assert [i for i, p in a if p.is_keyframe] == [0]


def test_the_rate_holds_at_the_streams_own_frame_rate(
    lib: libx264.Libx264, clip: list[av.VideoFrame]
) -> None:
    """15 fps: FFmpeg's encoder, told 30 fps, counts each frame as 1/30 s and sends half its target."""
    ours = H264Encoder(lib, 320, 240, 600_000)
    theirs = FanoutEncoder(bitrate=600_000, codec="H264")._open(320, 240)
    assert not isinstance(theirs, H264Encoder)
    a, b = (
        feed(ours, clip, 0, 150, step=6000, one_each=True),
        feed(theirs, clip, 0, 150, step=6000, one_each=True),
    )
    assert 540 < kbps(a, 30, 150, step=6000) < 660
    assert kbps(b, 30, 150, step=6000) < 360
    assert abs(ours.frame_rate - 15) < 0.01
    frame = clip[0]
    frame.pts, frame.pict_type = 150 * 6000 + 5 * 90000, av.video.frame.PictureType.NONE  # a 5 s pause
    ours.encode(frame)
    assert abs(ours.frame_rate - 15) < 0.01  # one long interval does not read as a slow stream


def test_the_picture_matches_ffmpegs_encoder_at_the_same_rate(
    lib: libx264.Libx264, clip: list[av.VideoFrame]
) -> None:
    ours = H264Encoder(lib, 320, 240, 300_000)
    theirs = FanoutEncoder(bitrate=300_000, codec="H264")._open(320, 240)  # without libx264: FFmpeg's
    a, b = feed(ours, clip, 0, 150, one_each=True), feed(theirs, clip, 0, 150, one_each=True)
    assert abs(kbps(a, 30, 150) - kbps(b, 30, 150)) < 0.05 * 300
    assert abs(psnr(a, clip, 30, "h264") - psnr(b, clip, 30, "h264")) < 0.5


def test_wrong_input_is_refused(lib: libx264.Libx264) -> None:
    encoder = H264Encoder(lib, 320, 240, 500_000)
    check_wrong_input_is_refused(encoder)
    with pytest.raises(RuntimeError, match="closed"):
        encoder.set_bitrate(300_000)


def test_fanout_changes_libx264_rate_without_a_keyframe_and_ffmpeg_with_one(lib: libx264.Libx264) -> None:
    keys, bps = fanout_keyframes(FanoutEncoder(bitrate=1_000_000, codec="H264", libx264=lib))
    assert keys == [0] and bps is not None and bps < 1_000_000
    keys, bps = fanout_keyframes(FanoutEncoder(bitrate=1_000_000, codec="H264"))
    assert keys == [0, 20] and bps is not None and bps < 1_000_000  # reopened: a keyframe at the change


def test_fanout_with_libx264_reopens_only_for_a_new_size(lib: libx264.Libx264) -> None:
    enc = FanoutEncoder(bitrate=600_000, codec="H264", libx264=lib)
    first = enc._open(320, 240)
    assert isinstance(first, H264Encoder)
    keys = keyframes_across_sizes(enc, [(240, 320)] * 3 + [(361, 641)] * 3)  # odd: cropped to even (4:2:0)
    assert keys == [0, 3] and enc._codec is not first
