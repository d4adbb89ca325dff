"""The capacity table shows the statistic each point's verdict was decided on, beside the whole run's p95.

The whole run's p95 pools every window, the early ones too; the search decides on the mean of the last
windows' p95. A row whose whole-run p95 is over budget can pass, and the table must say on what.
"""

from __future__ import annotations

from typing import Any

from loadgen.capacity import CapacityConfig, CapacitySearch, PointMeasurement, WindowMeasure
from loadgen.sweep import Cell, capacity_summary, point_dict
from loadgen.tables import VERDICT_P95, VERDICT_RECV, result_table

BUDGET = 150.0


def _entry(
    jobs: int, run_p95: float, windows: list[float], ratio: float, search: CapacitySearch
) -> dict[str, Any]:
    point = PointMeasurement(jobs, search.config)
    for p95 in windows:
        point.add(WindowMeasure(p95, ratio))
    result = point.result()
    search.report(result)
    return {
        "name": f"capacity-single_face-640x360-5s-n{jobs}",
        "concurrent_jobs": jobs,
        "latency_ms": {"p50": 90.0, "p95": run_p95, "p99": run_p95 + 20},
        "within_budget": 0.9,
        "frames": {"sent": 900, "received": 880, "lost": 20, "repeated": 0},
        "fps_per_job": {"mean": 14.5},
        "capacity_point": point_dict(result),
        "slo_met": result.ok,
        "jobs": [],
    }


def _rows(table: Any) -> list[dict[str, str]]:
    columns = {str(col.header): [str(c) for c in col.cells] for col in table.columns}
    return [{name: cells[k] for name, cells in columns.items()} for k in range(len(columns["run"]))]


def test_the_verdict_column_is_what_decided_and_agrees_with_the_slo_column() -> None:
    search = CapacitySearch(CapacityConfig(budget_ms=BUDGET, start=2, step=2, max_jobs=6))
    runs = [
        _entry(2, 95.0, [96.0, 94.0, 95.0], 1.0, search),
        # the case that read as a contradiction: the whole run's p95 over budget, the last windows within
        _entry(4, 182.6, [240.0, 141.0, 139.0, 143.0], 0.97, search),
        _entry(6, 260.0, [250.0, 262.0, 258.0], 0.95, search),
    ]
    cell = Cell("single_face", 640, 360, 5.0, None)
    capacity = capacity_summary(search, cell, timed_out=False)
    table = result_table(runs, capacity)
    rows = _rows(table)
    assert [r["p95 ms"] for r in rows] == ["95.0", "182.6", "260.0"]
    assert [r[VERDICT_P95] for r in rows] == ["95.0", "141.0", "256.7"]
    assert rows[1][VERDICT_RECV] == "97.0%"
    for row, run in zip(rows, runs, strict=True):
        decided = float(row[VERDICT_P95])
        assert ("ok" in row["SLO"]) == (decided <= BUDGET) == run["slo_met"]
    assert capacity["capacity"] == 4 and capacity["stable_windows"] == 3
    caption = str(table.caption)
    assert "capacity: 4 concurrent jobs within 150 ms p95" in caption
    assert VERDICT_P95 in caption and "last 3 windows" in caption


def test_a_plain_run_has_no_verdict_columns() -> None:
    search = CapacitySearch(CapacityConfig(budget_ms=BUDGET))
    run = _entry(1, 95.0, [95.0], 1.0, search)
    del run["capacity_point"]
    headers = [str(col.header) for col in result_table([run], None).columns]
    assert VERDICT_P95 not in headers and VERDICT_RECV not in headers and "p95 ms" in headers
