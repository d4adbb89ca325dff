"""Picture fidelity of a returned frame (loadgen.fidelity) and its place in the load generator's windows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loadgen.fidelity import MAX_DB, median_block_psnr
from loadgen.stats import FrameReceived, FrameSent, JobJoined, StatsCollector


def _picture(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(40, 200, size=(240, 320), dtype=np.uint8)


def test_an_identical_picture_has_the_ceiling_and_a_uniform_error_its_textbook_psnr() -> None:
    sent = _picture()
    assert median_block_psnr(sent.copy(), sent, rows=224) == MAX_DB
    received = (sent.astype(np.int16) + 4).astype(np.uint8)  # every pixel off by 4: MSE 16
    expected = 10 * math.log10(255**2 / 16)
    assert median_block_psnr(received, sent, rows=224) == pytest.approx(expected, abs=1e-3)


def test_the_swapped_face_does_not_count_but_a_blurred_picture_does() -> None:
    sent = _picture()
    coded = (sent.astype(np.int16) + 3).astype(np.uint8)
    baseline = median_block_psnr(coded, sent, rows=224)
    swapped = coded.copy()
    swapped[60:140, 120:200] = 255 - swapped[60:140, 120:200]  # a replaced face: 25 of 280 blocks
    assert median_block_psnr(swapped, sent, rows=224) == pytest.approx(baseline)
    blurred = ((sent[:, :-1].astype(np.int16) + sent[:, 1:]) // 2).astype(np.uint8)
    blurred = np.concatenate([blurred, sent[:, -1:]], axis=1)  # a low bitrate's loss of detail
    value = median_block_psnr(blurred, sent, rows=224)
    assert value is not None and baseline is not None and value < baseline - 10


def test_rows_below_the_limit_and_other_sizes_are_not_compared() -> None:
    sent = _picture()
    received = sent.copy()
    received[224:] = 0  # the stamp band: different in every frame by design
    assert median_block_psnr(received, sent, rows=224) == MAX_DB
    assert median_block_psnr(received[:, :160], sent, rows=224) is None


def test_a_window_summarises_the_fidelity_of_first_receipts() -> None:
    collector = StatsCollector(budget_ms=150)
    collector.record(JobJoined(0, 0.0, True))
    for i, psnr in enumerate([30.0, 32.0, 34.0, 36.0]):
        collector.record(FrameSent(0, i, 1.0 + i * 0.1))
        collector.record(FrameReceived(0, i, 1.05 + i * 0.1, psnr))
    collector.record(FrameReceived(0, 1, 1.6, 10.0))  # a repeat: not a new picture
    window = collector.window(1.0, 2.0)
    assert window.picture_psnr_db is not None
    assert window.picture_psnr_db.count == 4 and window.picture_psnr_db.p50 == pytest.approx(33.0)
    plain = StatsCollector(budget_ms=150)
    plain.record(FrameSent(0, 0, 1.0))
    plain.record(FrameReceived(0, 0, 1.1))
    assert plain.window(1.0, 2.0).picture_psnr_db is None
