"""The loadgen result table tells frames that never came back from frames whose stamp no longer reads."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from loadgen.tables import result_table


def _run(lost: int, unreadable: int) -> dict[str, Any]:
    return {
        "name": "single_face-320x240-15s",
        "concurrent_jobs": 2,
        "latency_ms": {"p50": 14.0, "p95": 21.0, "p99": 24.0},
        "within_budget": 1.0,
        "frames": {
            "sent": 450,
            "received": 450 - lost,
            "lost": lost,
            "repeated": 0,
            "unreadable": unreadable,
        },
        "fps_per_job": {"mean": 14.8},
        "slo_met": True,
        "jobs": [],
    }


def _cells(run: dict[str, Any]) -> dict[str, str]:
    table = result_table([run], None)
    return {str(col.header): str(next(iter(col.cells))) for col in table.columns}


def test_unreadable_frames_have_their_own_column() -> None:
    cells = _cells(_run(lost=7, unreadable=5))
    assert cells["lost"] == "7" and cells["unread"] == "5" and cells["recv"] == "443"


def test_a_report_without_the_field_reads_zero() -> None:
    run = _run(lost=2, unreadable=0)
    del run["frames"]["unreadable"]
    assert _cells(run)["unread"] == "0"
    out = io.StringIO()
    Console(width=200, file=out).print(result_table([run], None))
    assert "unread" in out.getvalue()
