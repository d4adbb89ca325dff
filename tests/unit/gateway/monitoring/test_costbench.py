"""Benchmark (excluded from make test): the monitor's own CPU cost at 1 s sampling, printed and written as
JSON.

.venv/bin/pytest tests/unit/gateway/monitoring/test_costbench.py -m benchmark -s
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.monitoring.costbench import run

REPORTS = Path(__file__).resolve().parents[4] / "reports"


@pytest.mark.benchmark
async def test_monitor_cost_at_one_second_sampling() -> None:
    result = await run(seconds=15.0, sessions=4, fps=30.0, interval_s=1.0)
    REPORTS.mkdir(exist_ok=True)
    (REPORTS / "monitor_cost.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    assert (
        result["samples"] and result["frames"]
    )  # numbers were measured; the 5% target is read, not asserted
