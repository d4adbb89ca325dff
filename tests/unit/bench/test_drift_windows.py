"""The drift benchmark's pure parts: the verdict on per-window numbers, and its frame book staying bounded."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bench.drift_windows import DriftTargets, FrameBook, Window, slope_per_min, verdict
from loadgen.stats import FrameReceived, FrameSent

WINDOW_S = 300.0


def _windows(
    p95s: Sequence[float],
    stale: Sequence[int] | None = None,
    threads: Sequence[int] | None = None,
    gw_cpu: Sequence[float] | None = None,
) -> list[Window]:
    out = []
    for i, p95 in enumerate(p95s):
        w = Window(i, i * WINDOW_S, (i + 1) * WINDOW_S)
        for k in range(100):  # 94 fast frames and 6 at what is then the window's p95
            w.latency_ms.add(10.0 if k < 94 else p95)
        w.sent = w.received = w.gateway_frames = 13_500
        w.stale = stale[i] if stale else 0
        w.gateway_cpu_s = (gw_cpu[i] if gw_cpu else 10.0) * w.gateway_frames / 1000.0
        w.loadgen_cpu_s = 4.0 * w.sent / 1000.0
        w.gateway_threads = [threads[i] if threads else 30] * 30
        out.append(w)
    return out


def _flat_rss(minutes: float, mb: float = 250.0, per_min: float = 0.0) -> list[tuple[float, float]]:
    return [(t * 30.0, mb + per_min * t / 2.0) for t in range(int(minutes * 2) + 1)]


def _check(result: dict[str, object], name: str) -> dict[str, object]:
    checks = result["checks"]
    assert isinstance(checks, list)
    return next(c for c in checks if c["check"] == name)


def test_a_flat_hour_is_no_drift() -> None:
    result = verdict(_windows([30.0] * 12), _flat_rss(60), _flat_rss(60, 150.0), DriftTargets())
    assert result["drift"] is False, result


def test_latency_doubling_at_the_end_is_drift() -> None:
    result = verdict(_windows([30.0] * 10 + [60.0] * 2), _flat_rss(60), _flat_rss(60), DriftTargets())
    assert result["drift"] is True
    assert _check(result, "p95 last/first")["ok"] is False
    assert _check(result, "p95 last/first")["value"] == pytest.approx(2.0, rel=0.02)


def test_stale_drops_piling_up_at_the_end_fail_even_under_the_overall_limit() -> None:
    stale = [0] * 10 + [20, 30]  # 50 of 162,000 frames: 0.03 %, all in the last 10 minutes
    result = verdict(_windows([30.0] * 12, stale=stale), _flat_rss(60), _flat_rss(60), DriftTargets())
    assert _check(result, "stale drops / frames")["ok"] is True
    assert _check(result, "stale drops not concentrated at the end")["ok"] is False
    spread = verdict(_windows([30.0] * 12, stale=[4] * 12), _flat_rss(60), _flat_rss(60), DriftTargets())
    assert _check(spread, "stale drops not concentrated at the end")["ok"] is True


def test_growing_threads_cpu_and_rss_each_fail_their_check() -> None:
    threads = [30, 30, 31, 33, 35, 37, 39, 41, 43, 43, 43, 43]
    gw_cpu = [10.0] * 10 + [13.0, 13.0]
    result = verdict(
        _windows([30.0] * 12, threads=threads, gw_cpu=gw_cpu),
        _flat_rss(60, per_min=0.5),
        _flat_rss(60),
        DriftTargets(),
    )
    assert _check(result, "gateway threads above the first window")["ok"] is False
    assert _check(result, "gateway CPU per frame last/first")["ok"] is False
    assert _check(result, "gateway RSS slope, MB/min")["value"] == pytest.approx(0.5)
    assert _check(result, "gateway RSS slope, MB/min")["ok"] is False
    assert _check(result, "loadgen RSS slope, MB/min")["ok"] is True


def test_a_run_too_short_to_compare_is_inconclusive_not_a_pass() -> None:
    result = verdict(_windows([30.0] * 3), _flat_rss(15), _flat_rss(15), DriftTargets())
    assert result["drift"] is None and "too short" in str(result["reason"])
    assert verdict([], [], [], DriftTargets())["drift"] is None


def test_slope_per_minute() -> None:
    assert slope_per_min([(0.0, 1.0), (60.0, 2.0), (120.0, 3.0)]) == pytest.approx(1.0)
    assert slope_per_min([(0.0, 1.0), (60.0, 2.0)]) is None


def test_frame_book_stays_bounded_over_hours_and_counts_every_frame() -> None:
    """Three hours of 3 jobs at 15 fps with 1 % lost: frames in flight never exceed what `lost_after_s` holds,
    and every frame ends received or lost in the window it was sent in."""
    fps, lost_after_s = 15, 5.0
    book = FrameBook(lost_after_s)
    windows: list[Window] = []
    largest = 0
    for second in range(3 * 3600):
        if second % 300 == 0:
            windows.append(Window(len(windows), second, second + 300.0))
            book.window = windows[-1]
        for k in range(fps):
            i = second * fps + k
            t = i / fps
            for job in range(3):
                book.record(FrameSent(job, i, t))
                if i % 100:
                    book.record(FrameReceived(job, i, t + 0.03))
        book.expire(second + 1.0)
        largest = max(largest, len(book))
    book.expire(3 * 3600 + lost_after_s + 1.0)
    assert largest <= 3 * fps * (lost_after_s + 1)
    assert len(book) == 0
    assert sum(w.sent for w in windows) == 3 * 3600 * fps * 3
    assert all(w.received + w.lost == w.sent for w in windows)
    assert sum(w.lost for w in windows) == 3 * len(range(0, 3 * 3600 * fps, 100))
    assert windows[0].latency_ms.percentile(50) == pytest.approx(30.0, rel=0.01)


def _with_probe(windows: list[Window], probe_ms: Sequence[float]) -> list[Window]:
    for w, ms in zip(windows, probe_ms, strict=True):
        w.probe_ms = [ms] * 30
    return windows


def test_cpu_per_frame_is_read_against_the_machines_speed() -> None:
    gw_cpu = [10.0] * 10 + [12.5, 12.5]  # every frame costs 25 % more in the last 10 minutes
    slower = _with_probe(_windows([30.0] * 12, gw_cpu=gw_cpu), [4.0] * 10 + [5.0, 5.0])
    result = verdict(slower, _flat_rss(60), _flat_rss(60), DriftTargets())
    check = _check(result, "gateway CPU per frame last/first, on the machine's speed")
    assert check["ok"] is True and check["value"] == pytest.approx(1.0)  # ...and so did the probe
    assert check["raw_ratio"] == pytest.approx(1.25) and check["machine_ratio"] == pytest.approx(1.25)
    assert check["per_probe_ms"] == pytest.approx(2.5)  # the cost followed the probe one for one
    steady = _with_probe(_windows([30.0] * 12, gw_cpu=gw_cpu), [4.0] * 12)
    result = verdict(steady, _flat_rss(60), _flat_rss(60), DriftTargets())
    check = _check(result, "gateway CPU per frame last/first, on the machine's speed")
    assert check["ok"] is False and check["value"] == pytest.approx(1.25)  # the machine did not slow: drift
    assert result["drift"] is True


def test_a_process_the_probes_swings_barely_reach_is_not_convicted_by_them() -> None:
    """The probe (a tight loop) swings 40 % with a busy neighbour and the gateway's cost only a little:
    dividing by the probe's last/first would call a steady gateway drifting; its measured slope does not."""
    probe = [3.6, 3.9, 3.7, 3.8, 2.6, 3.4, 3.8, 2.9, 3.5, 3.5, 2.5, 2.4]
    gw_cpu = [12.0 + 0.7 * (p - 3.4) for p in probe]
    result = verdict(
        _with_probe(_windows([30.0] * 12, gw_cpu=gw_cpu), probe), _flat_rss(60), _flat_rss(60), DriftTargets()
    )
    check = _check(result, "gateway CPU per frame last/first, on the machine's speed")
    assert check["ok"] is True and check["value"] == pytest.approx(1.0)
    assert check["per_probe_ms"] == pytest.approx(0.7)
    raw, machine = check["raw_ratio"], check["machine_ratio"]
    assert isinstance(raw, float) and isinstance(machine, float)
    assert raw / machine > 1.2  # what the one-for-one reading would say
    # the same windows with a 30 % rise at the end that the probe did not share: drift
    risen = [c * (1.3 if i >= 10 else 1.0) for i, c in enumerate(gw_cpu)]
    result = verdict(
        _with_probe(_windows([30.0] * 12, gw_cpu=risen), probe), _flat_rss(60), _flat_rss(60), DriftTargets()
    )
    assert _check(result, "gateway CPU per frame last/first, on the machine's speed")["ok"] is False
