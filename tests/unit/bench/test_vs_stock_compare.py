"""bench.vs_stock_compare: the CPU/frame window, the point at capacity, the comparison."""

from __future__ import annotations

import pytest

import bench.vs_stock as bvs
import bench.vs_stock_compare as vsc


def _point(
    jobs: int, p95: float | None, ok: bool, cpu: float | None = 10.0, p50: float | None = 20.0
) -> object:
    return vsc.Point(jobs, p50, p95, 1.0 if ok else 0.7, ok, True, cpu, 15.0 * jobs)


def test_server_window_uses_one_pair_of_samples_inside_the_window() -> None:
    S = vsc.ServerSample
    samples = [S(0.0, 1.0, 0), S(1.0, 1.5, 10), S(2.0, 2.0, 40), S(3.0, 2.3, 70), S(9.0, 9.0, 71)]
    w = vsc.server_window(samples, start=0.5, end=3.5)
    assert w is not None
    assert w.seconds == pytest.approx(2.0) and w.processed == 60 and w.cpu_s == pytest.approx(0.8)
    assert w.cpu_ms_per_frame == pytest.approx(800.0 / 60)
    assert w.processed_fps == pytest.approx(30.0)
    assert vsc.server_window(samples, start=0.5, end=1.5) is None  # a single sample is no interval
    assert w.dispatch_reasons == {} and w.batches_waited is None  # the stock design has no batcher
    idle = vsc.server_window([S(0.0, 1.0, 5), S(1.0, 1.1, 5)], 0.0, 1.0)
    assert idle is not None and idle.cpu_ms_per_frame is None  # nothing processed: no per-frame cost


def test_capacity_point_is_the_passing_one_at_capacity() -> None:
    pts = [_point(2, 40.0, True), _point(4, 90.0, True), _point(6, 200.0, False), _point(5, 160.0, False)]
    assert vsc.at_capacity(pts, 4).p95_ms == 90.0
    assert vsc.at_capacity(pts, 0) is None
    assert vsc.at_capacity(pts, 6) is None  # measured, but it failed


def _design(name: str, capacity: int, p95: float, cpu: float) -> object:
    r = vsc.DesignResult(name)
    r.points = [_point(capacity, p95, True, cpu), _point(capacity + 1, 170.0, False)]
    r.capacity = capacity
    return r


def test_compare_takes_the_best_stock_design_and_checks_the_targets() -> None:
    gw = _design("gateway", 9, 60.0, 9.0)
    ex = _design("stock-executor", 6, 140.0, 14.5)
    inline = _design("stock-inline", 5, 130.0, 14.0)
    c = vsc.compare([gw, ex, inline])
    assert c["baseline"] == "stock-executor"
    assert c["capacity_ratio"] == 1.5 and c["capacity_target_met"] is True
    assert c["p95_ratio_at_capacity"] == pytest.approx(60 / 140, abs=1e-3) and c["p95_target_met"] is True
    assert c["cpu_per_frame_ratio_at_capacity"] == pytest.approx(9.0 / 14.5, abs=1e-3)

    same = vsc.compare([_design("gateway", 6, 100.0, 14.0), _design("stock-executor", 6, 140.0, 14.5)])
    assert same["capacity_ratio"] == 1.0 and same["capacity_target_met"] is False
    assert same["p95_target_met"] is False


def test_compare_breaks_a_capacity_tie_on_p95_and_survives_missing_sides() -> None:
    a = _design("stock-executor", 6, 140.0, 14.5)
    b = _design("stock-inline", 6, 120.0, 14.0)
    assert vsc.compare([_design("gateway", 6, 80.0, 12.0), a, b])["baseline"] == "stock-inline"
    assert vsc.compare([a, b]) == {"baseline": None}
    broken = vsc.DesignResult("stock-executor", error="did not start")
    assert vsc.compare([_design("gateway", 6, 80.0, 12.0), broken]) == {"baseline": None}
    zero = vsc.compare([_design("gateway", 3, 80.0, 12.0), vsc.DesignResult("stock-inline")])
    assert zero["capacity_ratio"] is None and zero["capacity_target_met"] is None


def test_table_marks_the_capacity_point() -> None:
    gw = _design("gateway", 9, 60.0, 9.0)
    ex = _design("stock-executor", 6, 140.0, 14.5)
    text = vsc.format_table([gw, ex], vsc.compare([gw, ex]), "title")
    assert "ok  <- capacity" in text and "gateway vs stock-executor: capacity x1.5" in text


def test_server_window_counts_the_gateways_dispatch_reasons_in_the_window() -> None:
    S = vsc.ServerSample
    before = {"dispatch_reasons": {"full": 1, "partner_not_expected": 10}, "batches_waited": 2.0}
    after = {"dispatch_reasons": {"full": 4, "partner_not_expected": 50}, "batches_waited": 2.0}
    w = vsc.server_window([S(0.0, 0.0, 0, before, 3.0), S(5.0, 1.0, 80, after, 0.4)], 0.0, 5.0)
    assert w is not None
    assert w.dispatch_reasons == {"full": 3, "partner_not_expected": 40} and w.batches_waited == 0
    assert w.queue_wait_p50_ms == 0.4
    row = vsc.Point(4, 20.0, 40.0, 1.0, True, True, w.cpu_ms_per_frame, w.processed_fps, w).to_dict()
    assert row["dispatch_reasons"]["full"] == 3 and row["cpu_ms_per_frame"] == 12.5


def test_server_window_splits_the_machine_between_server_and_load_generator() -> None:
    S = vsc.ServerSample
    # server 0.8 CPU s, load generator 0.5 s, machine 1.6 busy s over 2 s: 0.4 / 0.25 / 0.8 cores
    samples = [
        S(0.0, 1.0, 0, client_cpu_s=3.0, machine_busy_s=10.0),
        S(2.0, 1.8, 30, client_cpu_s=3.5, machine_busy_s=11.6),
    ]
    w = vsc.server_window(samples, 0.0, 2.0)
    assert w is not None
    assert w.cores() == {
        "server": pytest.approx(0.4),
        "client": pytest.approx(0.25),
        "machine": pytest.approx(0.8),
    }
    p = vsc.Point(2, 20.0, 40.0, 1.0, True, True, w.cpu_ms_per_frame, w.processed_fps, w)
    assert p.to_dict()["cores"] == {"server": 0.4, "client": 0.25, "machine": 0.8}
    assert "0.40/0.25/0.80" in vsc.format_table([vsc.DesignResult("gateway", [p], 2)], {}, "t")
    busy = bvs._busy(
        type(
            "T",
            (),
            {
                "_fields": ("user", "system", "idle", "iowait", "steal", "guest"),
                "user": 5.0,
                "system": 1.0,
                "idle": 50.0,
                "iowait": 2.0,
                "steal": 3.0,
                "guest": 4.0,
            },
        )()
    )
    assert busy == 6.0  # idle, iowait, another guest's steal and guest (already in user) are not busy


def test_compare_gives_the_gateways_p95_at_the_baselines_capacity() -> None:
    gw = vsc.DesignResult("gateway")
    gw.points = [
        _point(6, 30.0, True),
        _point(8, 40.0, True),
        _point(9, 140.0, True),
        _point(10, 170.0, False),
    ]
    gw.capacity = 9
    ex = _design("stock-executor", 8, 120.0, 9.5)
    c = vsc.compare([gw, ex])
    assert c["p95_ratio_at_capacity"] == pytest.approx(140 / 120, abs=1e-3) and c["p95_target_met"] is False
    assert c["p95_ratio_at_baseline_capacity"] == pytest.approx(40 / 120, abs=1e-3)
    gw.points = [p for p in gw.points if p.jobs != 8]  # not measured at the baseline's capacity: unknown
    assert vsc.compare([gw, ex])["p95_ratio_at_baseline_capacity"] is None
