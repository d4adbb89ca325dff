"""Load generator accounting: latency from first return, repeats, losses, unreadable stamps, windows."""

from __future__ import annotations

from typing import Any

import pytest

from loadgen.stats import FrameReceived, FrameSent, JobJoined, LatencySummary, RunningTally, StatsCollector


def _collector() -> StatsCollector:
    c = StatsCollector(budget_ms=100)
    c.record(JobJoined(0, 0.0, True))
    c.record(JobJoined(1, 0.0, True))
    for i in range(10):
        c.record(FrameSent(0, i, 1.0 + i * 0.1))
        c.record(FrameSent(1, i, 1.0 + i * 0.1))
    # job 0: every frame back after 50 ms, frame 3 returned twice (a repeat)
    for i in range(10):
        c.record(FrameReceived(0, i, 1.0 + i * 0.1 + 0.05))
    c.record(FrameReceived(0, 3, 1.5))
    # job 1: even frames back after 150 ms, odd ones lost; one unreadable stamp; one ID never sent
    for i in range(0, 10, 2):
        c.record(FrameReceived(1, i, 1.0 + i * 0.1 + 0.15))
    c.record(FrameReceived(1, None, 1.2))
    c.record(FrameReceived(1, 999, 1.3))
    return c


def test_window_counts_and_latency() -> None:
    w = _collector().window(1.0, 2.0)
    assert (w.sent, w.received, w.lost, w.repeated, w.unreadable) == (20, 15, 5, 1, 2)
    assert w.latency.count == 15
    assert w.latency.p50 == pytest.approx(50.0)
    assert w.latency.max == pytest.approx(150.0)
    assert w.latency.within_budget == pytest.approx(10 / 15)
    assert w.received_ratio == pytest.approx(0.75)
    job0, job1 = w.jobs
    assert job0.received_fps == pytest.approx(10.0) and job1.received_fps == pytest.approx(5.0)
    assert w.fps_per_job_min == pytest.approx(5.0) and w.fps_per_job_mean == pytest.approx(7.5)
    assert job1.latency.p95 == pytest.approx(150.0)


def test_window_excludes_frames_sent_outside_it() -> None:
    w = _collector().window(1.5, 2.0)  # the warm-up (first half) is excluded
    assert w.sent == 10
    assert w.received == 5 + 2  # job 0: ids 5..9; job 1: ids 6, 8
    assert w.repeated == 1  # the repeat arrived at t=1.5


def test_samples_feed_the_csv() -> None:
    s = _collector().samples()
    assert len(s) == 15
    assert s[0].latency_ms == pytest.approx(50.0)
    assert all(a.sent_t <= b.sent_t for a, b in zip(s, s[1:], strict=False))


def test_join_failures_are_reported() -> None:
    c = StatsCollector(150)
    c.record(JobJoined(0, 0.0, True))
    c.record(JobJoined(1, 0.1, False, "HTTP 503"))
    assert [j.job for j in c.join_failures()] == [1]
    w = c.window(0.0, 1.0)
    assert w.sent == 0 and w.latency.p95 is None


def test_empty_latency_summary() -> None:
    s = LatencySummary.of([], 150)
    assert s.count == 0 and s.p95 is None


def test_fps_series_buckets_by_receive_time() -> None:
    series = _collector().fps_series(bucket_s=0.5)
    assert sum(fps * 0.5 for _, fps in series[0]) == pytest.approx(10)


def test_out_of_order_events_still_fall_in_their_window() -> None:
    c = StatsCollector(100)
    c.record(JobJoined(0, 0.0, True))
    for i, t in ((0, 1.0), (2, 1.2), (1, 1.1)):  # one send recorded late
        c.record(FrameSent(0, i, t))
        c.record(FrameReceived(0, i, t + 0.01))
    c.record(FrameReceived(0, None, 1.3))
    c.record(FrameReceived(0, None, 1.05))
    assert c.window(1.05, 1.15).sent == 1 and c.window(1.05, 1.15).received == 1
    assert c.window(1.0, 1.1).unreadable == 1 and c.window(1.0, 2.0).unreadable == 2


def test_running_tally_folds_each_frame_once_however_long_the_run() -> None:
    """An hour of 3 jobs at 15 fps refreshed every second: each refresh reads only the frames sent since the
    previous one (a scan from the run's start made the live table cost more every minute), and the totals
    equal the exact window's."""
    c = StatsCollector(150)
    fps, seconds = 15, 3600
    for job in range(3):
        c.record(JobJoined(job, 0.0, True))
    read: list[int] = []
    original = StatsCollector._job_window

    def counting(j: Any, start: float, end: float) -> tuple[list[int], list[float]]:
        ids, lat = original(j, start, end)
        read.append(len(ids))
        return ids, lat

    tally = RunningTally(0.0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(StatsCollector, "_job_window", staticmethod(counting))
        for second in range(seconds):
            for k in range(fps):
                i = second * fps + k
                t = i / fps
                for job in range(3):
                    c.record(FrameSent(job, i, t))
                    if i % 100:  # one frame in a hundred lost
                        c.record(FrameReceived(job, i, t + 0.02 + 0.01 * (i % 7)))
            tally.advance(c, float(second))
    assert max(read) <= fps  # never more than one second of frames per job per refresh
    exact = c.window(0.0, seconds - 1.0)
    for js in exact.jobs:
        got = tally.jobs[js.job]
        assert (got.sent, got.received, got.lost) == (js.sent, js.received, js.lost)
        assert js.latency.p95 is not None
        assert got.latency_ms.percentile(95) == pytest.approx(js.latency.p95, rel=0.01)
