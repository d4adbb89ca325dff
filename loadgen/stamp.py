"""Frame IDs written into the picture itself, so a frame can be recognised after a lossy round trip.

Why pixels and not RTP metadata: the gateway decodes, processes and re-encodes every frame, so nothing but the
image survives the trip. The stamp is a band along the bottom edge (away from faces) of `COLS x ROWS` cells,
one bit per cell, black or white luma. Cell geometry is a fraction of the frame size, so a reader needs no
side channel and a mid-stream resolution change keeps the stamp readable. Big flat cells survive VP8/H.264 at
low bitrate; the reader averages only each cell's centre (block edges ring) and refuses cells whose mean is
ambiguous. 24 ID bits are followed by a CRC-8 (init 0xFF, so an all-black or all-white band never passes):
a misread is detected and reported as unreadable, never miscounted as another frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ID_BITS = 24
CRC_BITS = 8
COLS = 16
ROWS = 2
MAX_ID = (1 << ID_BITS) - 1
BLACK = 16  # video-range luma extremes: what encoders expect, so no clipping surprises
WHITE = 235
# A cell whose centre mean lies in the middle band is not trusted (heavy blur, a foreign image).
_AMBIGUOUS = (0.30, 0.70)


def crc8(data: bytes, init: int = 0xFF) -> int:
    """CRC-8/ATM polynomial (0x07), non-zero init so a blank band has no valid checksum."""
    crc = init
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


@dataclass(frozen=True)
class BandGeometry:
    """Where the stamp lies in a frame of a given size (whole pixels, even-aligned for 4:2:0 chroma)."""

    width: int
    height: int
    top: int
    cell_h: int
    col_edges: tuple[int, ...]

    @staticmethod
    def for_size(width: int, height: int) -> BandGeometry:
        if width < COLS * 4 or height < 48:
            raise ValueError(f"frame {width}x{height} too small for a {COLS}x{ROWS} stamp")
        cell_h = max(8, (height // 24) // 2 * 2)
        top = height - ROWS * cell_h
        top -= top % 2
        edges = tuple(int(round(i * width / COLS)) // 2 * 2 for i in range(COLS + 1))
        return BandGeometry(width, height, top, cell_h, edges)

    @property
    def band_height(self) -> int:
        return self.height - self.top


def _bits(frame_id: int) -> list[int]:
    if not 0 <= frame_id <= MAX_ID:
        raise ValueError(f"frame id {frame_id} outside 0..{MAX_ID}")
    payload = frame_id.to_bytes(3, "big")
    word = (frame_id << CRC_BITS) | crc8(payload)
    n = ID_BITS + CRC_BITS
    return [(word >> (n - 1 - i)) & 1 for i in range(n)]


def write_stamp(luma: np.ndarray, frame_id: int) -> None:
    """Write `frame_id` into the bottom band of a HxW uint8 luma plane, in place."""
    h, w = luma.shape[:2]
    g = BandGeometry.for_size(w, h)
    bits = _bits(frame_id)
    for i, bit in enumerate(bits):
        r, c = divmod(i, COLS)
        y0 = g.top + r * g.cell_h
        luma[y0 : y0 + g.cell_h, g.col_edges[c] : g.col_edges[c + 1]] = WHITE if bit else BLACK
    # Anything below the cell rows (odd remainders) stays black so it never looks like data.
    luma[g.top + ROWS * g.cell_h :, :] = BLACK


def clear_band(yuv420: np.ndarray, width: int, height: int) -> None:
    """Neutral chroma under the band of a packed I420 array (shape (H*3/2, W)), so the band is pure luma."""
    g = BandGeometry.for_size(width, height)
    chroma = yuv420[height:]
    # I420 planes packed as rows of width W: U then V, each H/2 rows of W/2 → H/4 rows of W.
    rows_per_plane = height // 4
    start = (g.top // 2) // 2  # two chroma rows of W/2 per packed row
    chroma[start:rows_per_plane, :] = 128
    chroma[rows_per_plane + start :, :] = 128


def read_stamp(luma: np.ndarray) -> int | None:
    """The frame ID stamped in a HxW luma plane, or None when the band is unreadable or fails its CRC."""
    h, w = luma.shape[:2]
    try:
        g = BandGeometry.for_size(w, h)
    except ValueError:
        return None
    bits: list[int] = []
    lo = BLACK + (WHITE - BLACK) * _AMBIGUOUS[0]
    hi = BLACK + (WHITE - BLACK) * _AMBIGUOUS[1]
    for i in range(ID_BITS + CRC_BITS):
        r, c = divmod(i, COLS)
        y0 = g.top + r * g.cell_h
        x0, x1 = g.col_edges[c], g.col_edges[c + 1]
        my, mx = max(1, g.cell_h // 4), max(1, (x1 - x0) // 4)
        mean = float(luma[y0 + my : y0 + g.cell_h - my, x0 + mx : x1 - mx].mean())
        if lo < mean < hi:
            return None
        bits.append(1 if mean >= hi else 0)
    word = 0
    for b in bits:
        word = (word << 1) | b
    frame_id = word >> CRC_BITS
    if crc8(frame_id.to_bytes(3, "big")) != word & 0xFF:
        return None
    return frame_id
