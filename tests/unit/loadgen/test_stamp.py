"""Frame-ID stamps: exact round trip through VP8 at low bitrate; corruption is detected, not miscounted."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from loadgen.stamp import BLACK, MAX_ID, WHITE, BandGeometry, crc8, read_stamp, write_stamp
from loadgen.synth import SynthConfig, build_loop


@pytest.mark.parametrize("size", [(320, 240), (640, 360), (1280, 720), (1920, 1080)])
def test_stamp_round_trips_in_raw_pixels(size: tuple[int, int]) -> None:
    w, h = size
    luma = np.full((h, w), 128, np.uint8)
    for frame_id in (0, 1, 255, 65536, 1234567, MAX_ID):
        write_stamp(luma, frame_id)
        assert read_stamp(luma) == frame_id


def test_blank_or_foreign_bands_never_read_as_an_id() -> None:
    assert read_stamp(np.full((240, 320), BLACK, np.uint8)) is None
    assert read_stamp(np.full((240, 320), WHITE, np.uint8)) is None
    assert read_stamp(np.full((240, 320), 128, np.uint8)) is None
    rng = np.random.default_rng(0)
    noise = (rng.integers(0, 256, (240, 320), dtype=np.uint8) for _ in range(200))
    misreads = sum(read_stamp(luma) is not None for luma in noise)
    assert misreads == 0


def test_flipped_bit_is_detected_by_the_crc() -> None:
    luma = np.full((240, 320), 128, np.uint8)
    write_stamp(luma, 4242)
    g = BandGeometry.for_size(320, 240)
    for col in range(16):
        corrupted = luma.copy()
        cell = corrupted[g.top : g.top + g.cell_h, g.col_edges[col] : g.col_edges[col + 1]]
        cell[:] = np.where(cell > 128, BLACK, WHITE)  # flip one ID bit
        assert read_stamp(corrupted) is None


def test_ambiguous_cell_is_refused() -> None:
    luma = np.full((240, 320), 128, np.uint8)
    write_stamp(luma, 99)
    g = BandGeometry.for_size(320, 240)
    luma[g.top : g.top + g.cell_h, g.col_edges[3] : g.col_edges[4]] = 125
    assert read_stamp(luma) is None


def test_crc8_known_values() -> None:
    assert crc8(b"") == 0xFF
    assert crc8(b"\x00\x00\x00") != 0
    assert crc8(b"123456789", init=0) == 0xF4  # CRC-8/SMBUS check value (poly 0x07, init 0)


def _vp8_round_trip(frames: list[av.VideoFrame], width: int, height: int, bitrate: int) -> list[np.ndarray]:
    enc = av.CodecContext.create("libvpx", "w")
    enc.width, enc.height, enc.pix_fmt = width, height, "yuv420p"
    enc.time_base = Fraction(1, 15)
    enc.framerate = Fraction(15, 1)
    enc.bit_rate = bitrate
    enc.options = {"deadline": "realtime", "cpu-used": "8", "lag-in-frames": "0", "error-resilient": "1"}
    dec = av.CodecContext.create("vp8", "r")
    out: list[np.ndarray] = []
    for i, f in enumerate(frames):
        f.pts = i
        f.time_base = enc.time_base
        for pkt in enc.encode(f):
            for d in dec.decode(pkt):
                out.append(d.to_ndarray(format="gray"))
    for pkt in enc.encode(None):
        for d in dec.decode(pkt):
            out.append(d.to_ndarray(format="gray"))
    return out


@pytest.mark.parametrize("case,size", [("single_face", (320, 240)), ("multi_face", (640, 360))])
def test_ids_survive_vp8_at_300_kbps(media_dir: Path, case: str, size: tuple[int, int]) -> None:
    w, h = size
    loop = build_loop(SynthConfig(w, h, 15, case, loop_frames=15), media_dir)
    ids = list(range(1000, 1045))
    decoded = _vp8_round_trip([loop.frame(i) for i in ids], w, h, 300_000)
    assert len(decoded) == len(ids)
    assert [read_stamp(y) for y in decoded] == ids


def test_ids_survive_downscaling(media_dir: Path) -> None:
    """A receiver that scaled the frame (a browser lowering its resolution) still reads the stamp."""
    import cv2

    loop = build_loop(SynthConfig(640, 360, 15, "single_face", loop_frames=4), media_dir)
    luma = loop.frame(777).to_ndarray(format="gray")
    assert read_stamp(cv2.resize(luma, (480, 270), interpolation=cv2.INTER_AREA)) == 777
