"""VP8 through libvpx itself (gateway.media.libvpx, gateway.media.vp8_encoder): the binding's layout checks,
a rate change without a keyframe, the same picture as FFmpeg's encoder at the same rate, and FanoutEncoder
using it."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from gateway.media import libvpx
from gateway.media.fanout import FanoutEncoder
from gateway.media.vp8_encoder import Vp8Encoder

TB = Fraction(1, 90000)


@pytest.fixture(scope="module")
def lib() -> libvpx.Libvpx:
    found = libvpx.load()
    assert found is not None, "PyAV's wheel bundles libvpx: it must load"
    return found


@pytest.fixture(scope="module")
def clip(media: dict[str, Path]) -> list[av.VideoFrame]:
    """The carphone clip at 320x240, yuv420p (a real talking face, real motion)."""
    with av.open(str(media["carphone_pristine.mp4"])) as container:
        return [f.reformat(width=320, height=240, format="yuv420p") for f in container.decode(video=0)]


def _feed(encoder: object, frames: list[av.VideoFrame], start: int, count: int, key_at: int = -1) -> list:
    out = []
    for i in range(start, start + count):
        frame = frames[i % len(frames)]
        frame.pts, frame.time_base = i * 3000, TB
        frame.pict_type = av.video.frame.PictureType.I if i == key_at else av.video.frame.PictureType.NONE
        out += [(i, packet) for packet in encoder.encode(frame)]  # type: ignore[attr-defined]
    return out


def _kbps(packets: list, first: int, last: int) -> float:
    return sum(p.size for i, p in packets if first <= i < last) * 8 / ((last - first) / 30) / 1000


def _psnr(packets: list, frames: list[av.VideoFrame], first: int) -> float:
    decoder = av.CodecContext.create("vp8", "r")
    values = []
    for i, packet in packets:
        for decoded in decoder.decode(packet):
            if i >= first:
                a = decoded.to_ndarray(format="yuv420p").astype(np.float64)
                b = frames[i % len(frames)].to_ndarray(format="yuv420p").astype(np.float64)
                values.append(10 * np.log10(255**2 / np.mean((a - b) ** 2)))
    assert len(values) == len([i for i, _ in packets if i >= first]), "every packet decodes to a picture"
    return float(np.mean(values))


def test_the_bundled_library_loads_and_its_layouts_check(lib: libvpx.Libvpx) -> None:
    assert lib.abi_version > 0 and lib.version.startswith("v1.")
    lib.check_layouts()


def test_a_library_whose_layout_differs_is_refused(
    lib: libvpx.Libvpx, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = lib.default_config

    def shifted() -> libvpx.EncoderConfig:  # as if a field had moved: a default read at the wrong offset
        cfg = real()
        cfg.rc_target_bitrate = 4
        return cfg

    monkeypatch.setattr(lib, "default_config", shifted)
    with pytest.raises(libvpx.LibvpxError, match="rc_target_bitrate"):
        lib.check_layouts()


def test_what_is_not_libvpx_is_not_loaded(tmp_path: Path) -> None:
    not_a_library = tmp_path / "libvpx.so"
    not_a_library.write_bytes(b"\x7fELF but not really")
    assert libvpx.load([str(tmp_path / "missing.so"), str(not_a_library)]) is None
    assert libvpx.load(["libc.so.6"]) is None  # a real library without vpx's symbols


def test_a_new_rate_applies_at_once_without_a_keyframe(lib: libvpx.Libvpx, clip: list[av.VideoFrame]) -> None:
    encoder = Vp8Encoder(lib, 320, 240, 1_000_000, cpu_used=-8, noise_sensitivity=0)
    packets = _feed(encoder, clip, 0, 90)
    encoder.set_bitrate(250_000)
    packets += _feed(encoder, clip, 90, 90)
    assert [i for i, p in packets if p.is_keyframe] == [0]
    assert 800 < _kbps(packets, 30, 90) < 1200
    assert 190 < _kbps(packets, 105, 180) < 310  # within half a second of the change
    assert encoder.bit_rate == 250_000
    packets = _feed(encoder, clip, 180, 3, key_at=181)  # a keyframe only when asked
    assert [i for i, p in packets if p.is_keyframe] == [181]
    assert all(p.time_base == TB and p.pts == i * 3000 for i, p in packets)
    encoder.close()
    encoder.close()  # idempotent


def test_the_first_keyframe_does_not_spend_a_full_buffer(
    lib: libvpx.Libvpx, clip: list[av.VideoFrame]
) -> None:
    """libvpx's default starting level is the whole buffer, all of it spent on the first keyframe (15.7 KB at
    500 kbit/s: 0.25 s of the rate, more than a 200 ms bottleneck queue holds); libwebrtc starts at 500 ms."""
    first = _feed(Vp8Encoder(lib, 320, 240, 500_000, cpu_used=-8, noise_sensitivity=0), clip, 0, 1)[0][1]
    full = Vp8Encoder(lib, 320, 240, 500_000, cpu_used=-8, noise_sensitivity=0, initial_buffer_ms=1000)
    assert first.is_keyframe and first.size * 8 < 0.15 * 500_000 < _feed(full, clip, 0, 1)[0][1].size * 8


def test_the_picture_matches_ffmpegs_encoder_at_the_same_rate(
    lib: libvpx.Libvpx, clip: list[av.VideoFrame]
) -> None:
    ours = Vp8Encoder(lib, 320, 240, 300_000, cpu_used=-8, noise_sensitivity=0)
    theirs = FanoutEncoder(bitrate=300_000)._open(320, 240)  # FanoutEncoder without libvpx: FFmpeg's
    assert not isinstance(theirs, Vp8Encoder)
    a, b = _feed(ours, clip, 0, 150), _feed(theirs, clip, 0, 150)
    assert abs(_kbps(a, 30, 150) - _kbps(b, 30, 150)) < 0.05 * 300
    assert abs(_psnr(a, clip, 30) - _psnr(b, clip, 30)) < 0.5


def test_wrong_input_is_refused(lib: libvpx.Libvpx) -> None:
    encoder = Vp8Encoder(lib, 320, 240, 500_000, cpu_used=-8, noise_sensitivity=0)
    with pytest.raises(ValueError, match="expected yuv420p 320x240"):
        encoder.encode(av.VideoFrame(640, 360, "yuv420p"))
    with pytest.raises(ValueError, match="rgb24"):
        encoder.encode(av.VideoFrame(320, 240, "rgb24"))
    encoder.close()
    with pytest.raises(RuntimeError, match="closed"):
        encoder.encode(av.VideoFrame(320, 240, "yuv420p"))


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


def test_fanout_changes_libvpx_rate_without_a_keyframe_and_ffmpeg_with_one(lib: libvpx.Libvpx) -> None:
    keys, bps = _fanout_keyframes(FanoutEncoder(bitrate=1_000_000, libvpx=lib))
    assert keys == [0] and bps is not None and bps < 1_000_000
    keys, bps = _fanout_keyframes(FanoutEncoder(bitrate=1_000_000))
    assert keys == [0, 20] and bps is not None and bps < 1_000_000  # reopened: a keyframe at the change


def test_fanout_with_libvpx_reopens_only_for_a_new_size(lib: libvpx.Libvpx) -> None:
    enc = FanoutEncoder(bitrate=600_000, libvpx=lib)
    first = enc._open(320, 240)
    assert isinstance(first, Vp8Encoder)
    keys = []
    for i, size in enumerate([(240, 320)] * 3 + [(360, 640)] * 3):
        keys += [i for p in enc.encode(np.zeros((*size, 3), np.uint8), (i + 1) * 3000) if p.is_keyframe]
    assert keys == [0, 3] and enc._codec is not first
