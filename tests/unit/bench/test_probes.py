"""bench.probes.LiveProbe: the live session's windows, one or several pooled (the quiet before and after an
attack compared with the attack, so that a drift over the run cancels out)."""

from __future__ import annotations

import pytest

from bench.probes import LiveProbe
from loadgen.stats import FrameReceived, FrameSent, JobJoined


def _probe() -> LiveProbe:
    """15 fps for 30 s: 10 ms a frame for the first 10 s, 30 ms from 10 to 20 s, 20 ms from 20 s on; every
    tenth frame of the last span lost, one unreadable stamp in the first."""
    probe = LiveProbe()
    probe.emit(JobJoined(1, 0.0, True))
    for i in range(450):
        t = i / 15
        probe.emit(FrameSent(1, i, t))
        delay = 0.010 if t < 10 else 0.030 if t < 20 else 0.020
        if t >= 20 and i % 10 == 0:
            continue
        probe.emit(FrameReceived(1, i, t + delay))
    probe.emit(FrameReceived(1, None, 5.0))
    return probe


def test_one_window_is_the_frames_sent_in_it() -> None:
    w = _probe().window(0.0, 10.0)
    assert (w.sent, w.received, w.unreadable, w.missing) == (150, 150, 1, 0)
    assert w.fps == pytest.approx(15.0) and w.loss == 0.0
    assert w.p50_ms == pytest.approx(10.0) and w.p95_ms == pytest.approx(10.0)


def test_pooled_windows_count_both_spans_and_take_percentiles_over_their_frames_together() -> None:
    probe = _probe()
    both = probe.pooled([(0.0, 10.0), (20.0, 30.0)])
    assert (both.sent, both.received, both.unreadable) == (300, 285, 1)
    assert both.fps == pytest.approx(285 / 20.0)
    assert both.loss == pytest.approx(15 / 300)
    assert both.missing == 14  # 15 not back readable, one of them came back with its stamp unreadable
    assert both.p50_ms == pytest.approx(10.0)  # 150 frames at 10 ms, 135 at 20 ms
    assert both.p95_ms == pytest.approx(20.0)
    # the 30 ms span between them is left out: pooling is not one window from the first start to the last end
    assert probe.window(0.0, 30.0).p95_ms == pytest.approx(30.0)


def test_a_pooled_window_without_frames_has_no_percentiles() -> None:
    empty = _probe().pooled([(100.0, 110.0)])
    assert (empty.sent, empty.received, empty.p50_ms, empty.p95_ms, empty.loss) == (0, 0, None, None, 0.0)
