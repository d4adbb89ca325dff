"""VP8 through libvpx itself (gateway.webrtc.codecs.libvpx, gateway.webrtc.codecs.vp8_encoder): the binding's
layout checks,
a rate change without a keyframe, the same picture as FFmpeg's encoder at the same rate, and FanoutEncoder
using it."""

from __future__ import annotations

from pathlib import Path

import av
import pytest

from gateway.media.fanout import FanoutEncoder
from gateway.webrtc.codecs import libvpx
from gateway.webrtc.codecs.vp8_encoder import Vp8Encoder
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
def lib() -> libvpx.Libvpx:
    found = libvpx.load()
    assert found is not None, "PyAV's wheel bundles libvpx: it must load"
    return found


@pytest.fixture(scope="module")
def clip(media: dict[str, Path]) -> list[av.VideoFrame]:
    return carphone(media["carphone_pristine.mp4"])


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
    packets = feed(encoder, clip, 0, 90)
    encoder.set_bitrate(250_000)
    packets += feed(encoder, clip, 90, 90)
    assert [i for i, p in packets if p.is_keyframe] == [0]
    assert 800 < kbps(packets, 30, 90) < 1200
    assert 190 < kbps(packets, 105, 180) < 310  # within half a second of the change
    assert encoder.bit_rate == 250_000
    packets = feed(encoder, clip, 180, 3, key_at=181)  # a keyframe only when asked
    assert [i for i, p in packets if p.is_keyframe] == [181]
    assert all(p.time_base == TB and p.pts == i * 3000 for i, p in packets)
    encoder.close()
    encoder.close()  # idempotent


def test_the_first_keyframe_does_not_spend_a_full_buffer(
    lib: libvpx.Libvpx, clip: list[av.VideoFrame]
) -> None:
    """libvpx's default starting level is the whole buffer, all of it spent on the first keyframe (15.7 KB at
    500 kbit/s: 0.25 s of the rate, more than a 200 ms bottleneck queue holds); libwebrtc starts at 500 ms."""
    first = feed(Vp8Encoder(lib, 320, 240, 500_000, cpu_used=-8, noise_sensitivity=0), clip, 0, 1)[0][1]
    full = Vp8Encoder(lib, 320, 240, 500_000, cpu_used=-8, noise_sensitivity=0, initial_buffer_ms=1000)
    assert first.is_keyframe and first.size * 8 < 0.15 * 500_000 < feed(full, clip, 0, 1)[0][1].size * 8


def test_the_picture_matches_ffmpegs_encoder_at_the_same_rate(
    lib: libvpx.Libvpx, clip: list[av.VideoFrame]
) -> None:
    ours = Vp8Encoder(lib, 320, 240, 300_000, cpu_used=-8, noise_sensitivity=0)
    theirs = FanoutEncoder(bitrate=300_000)._open(320, 240)  # FanoutEncoder without libvpx: FFmpeg's
    assert not isinstance(theirs, Vp8Encoder)
    a, b = feed(ours, clip, 0, 150), feed(theirs, clip, 0, 150)
    assert abs(kbps(a, 30, 150) - kbps(b, 30, 150)) < 0.05 * 300
    assert abs(psnr(a, clip, 30, "vp8") - psnr(b, clip, 30, "vp8")) < 0.5


def test_wrong_input_is_refused(lib: libvpx.Libvpx) -> None:
    check_wrong_input_is_refused(Vp8Encoder(lib, 320, 240, 500_000, cpu_used=-8, noise_sensitivity=0))


def test_fanout_changes_libvpx_rate_without_a_keyframe_and_ffmpeg_with_one(lib: libvpx.Libvpx) -> None:
    keys, bps = fanout_keyframes(FanoutEncoder(bitrate=1_000_000, libvpx=lib))
    assert keys == [0] and bps is not None and bps < 1_000_000
    keys, bps = fanout_keyframes(FanoutEncoder(bitrate=1_000_000))
    assert keys == [0, 20] and bps is not None and bps < 1_000_000  # reopened: a keyframe at the change


def test_fanout_with_libvpx_reopens_only_for_a_new_size(lib: libvpx.Libvpx) -> None:
    enc = FanoutEncoder(bitrate=600_000, libvpx=lib)
    first = enc._open(320, 240)
    assert isinstance(first, Vp8Encoder)
    keys = keyframes_across_sizes(enc, [(240, 320)] * 3 + [(360, 640)] * 3)
    assert keys == [0, 3] and enc._codec is not first
