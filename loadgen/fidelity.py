"""How faithful a returned picture is to the one that was sent, outside what the gateway meant to change.
Pure: two luma planes in, one number out.

Why: a rate controller that lowers the bitrate trades sharpness for smoothness, and a lossy link leaves
artefacts where a reference was missing. Latency and freezes do not show either. The gateway swaps a face,
so a whole-picture PSNR would mostly measure the swap. The face is a minority of the picture (a few per cent
of its 16x16 blocks at the load generator's framing), so the **median block's** error is the picture's
coding and transport error: the publisher's encode, the gateway's re-encode and whatever the link did,
with the swapped blocks out of the middle of the distribution. Luma only (what viewers see sharpness in),
and the stamp band (`loadgen.stamp`) left out.
"""

from __future__ import annotations

import math

import numpy as np

BLOCK = 16
MAX_DB = 99.0  # an identical picture: a finite number the reports can carry


def median_block_psnr(received: np.ndarray, sent: np.ndarray, rows: int, block: int = BLOCK) -> float | None:
    """PSNR (dB) of the median `block`x`block` block's mean squared luma error over the first `rows` rows;
    None when the pictures differ in size (a resized stream is not comparable pixel for pixel)."""
    if received.shape != sent.shape or rows <= 0:
        return None
    height = min(rows, received.shape[0]) // block * block
    width = received.shape[1] // block * block
    if height == 0 or width == 0:
        return None
    a = received[:height, :width].astype(np.float32)
    b = sent[:height, :width].astype(np.float32)
    squared = (a - b) ** 2
    per_block = squared.reshape(height // block, block, width // block, block).mean(axis=(1, 3))
    mse = float(np.median(per_block))
    if mse <= 0.0:
        return MAX_DB
    return min(MAX_DB, 10.0 * math.log10(255.0 * 255.0 / mse))
