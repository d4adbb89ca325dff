"""H.264 through libx264 itself (gateway.media.libx264, gateway.media.h264_encoder): the binding's layout
probes, a rate change without a keyframe, the rate at the stream's own frame rate, no frame held back, the
same picture as FFmpeg's encoder at the same rate, and FanoutEncoder using it."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from gateway.media import libx264
from gateway.media.fanout import FanoutEncoder
from gateway.media.h264_encoder import H264Encoder

TB = Fraction(1, 90000)


@pytest.fixture(scope="module")
def lib() -> libx264.Libx264:
    found = libx264.load()
    assert found is not None, "PyAV's wheel bundles libx264: it must load"
    return found


@pytest.fixture(scope="module")
def clip(media: dict[str, Path]) -> list[av.VideoFrame]:
    """The carphone clip at 320x240, yuv420p (a real talking face, real motion)."""
    with av.open(str(media["carphone_pristine.mp4"])) as container:
        return [f.reformat(width=320, height=240, format="yuv420p") for f in container.decode(video=0)]


def _feed(
    encoder: object, frames: list[av.VideoFrame], start: int, count: int, key_at: int = -1, step: int = 3000
) -> list:
    """Encode frames start..start+count-1 at `step` ticks apart; every frame must come out at once."""
    out = []
    for i in range(start, start + count):
        frame = frames[i % len(frames)]
        frame.pts, frame.time_base = i * step, TB
        frame.pict_type = av.video.frame.PictureType.I if i == key_at else av.video.frame.PictureType.NONE
        packets = list(encoder.encode(frame))  # type: ignore[attr-defined]
        assert len(packets) == 1, f"frame {i} gave {len(packets)} packets: the encoder held a frame back"
        out += [(i, packet) for packet in packets]
    return out


def _kbps(packets: list, first: int, last: int, step: int = 3000) -> float:
    return sum(p.size for i, p in packets if first <= i < last) * 8 / ((last - first) * step / 90000) / 1000


def _psnr(packets: list, frames: list[av.VideoFrame], first: int) -> float:
    decoder = av.CodecContext.create("h264", "r")
    values = []
    for i, packet in packets:
        for decoded in decoder.decode(packet):
            if i >= first:
                a = decoded.to_ndarray(format="yuv420p").astype(np.float64)
                b = frames[i % len(frames)].to_ndarray(format="yuv420p").astype(np.float64)
                values.append(10 * np.log10(255**2 / np.mean((a - b) ** 2)))
    assert len(values) == len([i for i, _ in packets if i >= first]), "every packet decodes to a picture"
    return float(np.mean(values))


def test_the_bundled_library_loads_and_its_layouts_check(lib: libx264.Libx264) -> None:
    assert lib.build >= 150
    assert (lib.offsets.width, lib.offsets.height) == (28, 32)  # the head of x264_param_t, stable for years
    assert lib.offsets.timebase_num == lib.offsets.fps_num + 8 == lib.offsets.vfr_input + 16
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
    packets = _feed(encoder, clip, 0, 90)
    encoder.set_bitrate(250_000)
    packets += _feed(encoder, clip, 90, 90)
    assert [i for i, p in packets if p.is_keyframe] == [0]
    assert 800 < _kbps(packets, 30, 90) < 1200
    assert 190 < _kbps(packets, 105, 180) < 310  # within half a second of the change
    assert encoder.bit_rate == 250_000
    packets = _feed(encoder, clip, 180, 3, key_at=181)  # a keyframe only when asked
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
    a, b = _feed(drained, clip, 0, 60), _feed(kept, clip, 0, 60)
    drained.set_bitrate(250_000)
    kept.set_bitrate(250_000)
    a += _feed(drained, clip, 60, 30)
    b += _feed(kept, clip, 60, 30)
    assert _kbps(a, 60, 75) < 1.2 * 250 < _kbps(b, 60, 75)  # the half second after the cut
    assert 190 < _kbps(a, 75, 90) < 310
    assert [i for i, p in a if p.is_keyframe] == [0]


def test_the_rate_holds_at_the_streams_own_frame_rate(
    lib: libx264.Libx264, clip: list[av.VideoFrame]
) -> None:
    """15 fps: FFmpeg's encoder, told 30 fps, counts each frame as 1/30 s and sends half its target."""
    ours = H264Encoder(lib, 320, 240, 600_000)
    theirs = FanoutEncoder(bitrate=600_000, codec="H264")._open(320, 240)
    assert not isinstance(theirs, H264Encoder)
    a, b = _feed(ours, clip, 0, 150, step=6000), _feed(theirs, clip, 0, 150, step=6000)
    assert 540 < _kbps(a, 30, 150, step=6000) < 660
    assert _kbps(b, 30, 150, step=6000) < 360
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
    a, b = _feed(ours, clip, 0, 150), _feed(theirs, clip, 0, 150)
    assert abs(_kbps(a, 30, 150) - _kbps(b, 30, 150)) < 0.05 * 300
    assert abs(_psnr(a, clip, 30) - _psnr(b, clip, 30)) < 0.5


def test_wrong_input_is_refused(lib: libx264.Libx264) -> None:
    encoder = H264Encoder(lib, 320, 240, 500_000)
    with pytest.raises(ValueError, match="expected yuv420p 320x240"):
        encoder.encode(av.VideoFrame(640, 360, "yuv420p"))
    with pytest.raises(ValueError, match="rgb24"):
        encoder.encode(av.VideoFrame(320, 240, "rgb24"))
    encoder.close()
    with pytest.raises(RuntimeError, match="closed"):
        encoder.encode(av.VideoFrame(320, 240, "yuv420p"))
    with pytest.raises(RuntimeError, match="closed"):
        encoder.set_bitrate(300_000)


def _fanout_keyframes(enc: FanoutEncoder) -> tuple[list[int], int | None]:
    enc.subscribe()
    enc.bitrate.add("viewer")
    keys = []
    for i in range(40):
        img = np.full((240, 320, 3), 40 + (i * 7) % 150, np.uint8)
        if i == 20:
            enc.bitrate.on_loss("viewer", 0.4, now=1.0)  # the receiver lost packets: a lower rate
            enc._retarget(1.0)
        keys += [i for p in enc.encode(img, (i + 1) * 3000) if p.is_keyframe]
    return keys, enc.encoding_bps


def test_fanout_changes_libx264_rate_without_a_keyframe_and_ffmpeg_with_one(lib: libx264.Libx264) -> None:
    keys, bps = _fanout_keyframes(FanoutEncoder(bitrate=1_000_000, codec="H264", libx264=lib))
    assert keys == [0] and bps is not None and bps < 1_000_000
    keys, bps = _fanout_keyframes(FanoutEncoder(bitrate=1_000_000, codec="H264"))
    assert keys == [0, 20] and bps is not None and bps < 1_000_000  # reopened: a keyframe at the change


def test_fanout_with_libx264_reopens_only_for_a_new_size(lib: libx264.Libx264) -> None:
    enc = FanoutEncoder(bitrate=600_000, codec="H264", libx264=lib)
    first = enc._open(320, 240)
    assert isinstance(first, H264Encoder)
    keys = []
    for i, size in enumerate([(240, 320)] * 3 + [(361, 641)] * 3):  # odd: cropped to even for 4:2:0
        keys += [i for p in enc.encode(np.zeros((*size, 3), np.uint8), (i + 1) * 3000) if p.is_keyframe]
    assert keys == [0, 3] and enc._codec is not first
