"""The capacity gauge against a measured capacity (benchmark marker: minutes of real load; not in make test).

`loadgen capacity` finds the largest N whose p95 stays in the budget on this machine, and every
point's report carries the gateway's own `capacity_sessions` estimate from /api/stats. The estimate seen at
the largest passing point must name that capacity within one session (or 25 %), and past it the
utilisation gauge must say the binding resource is (nearly) full. The old worker-only estimate said 12-13
here where 6 was measured.

    flock /tmp/livefuse-bench.lock \
        python -m pytest tests/integration/test_capacity_measured.py -m benchmark -s
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.cli import main

pytestmark = pytest.mark.benchmark


def test_capacity_estimate_matches_measured(tmp_path: Path, media_dir: Path, model_store: object) -> None:
    report = tmp_path / "capacity.json"
    main(
        [
            "capacity",
            "--resolution",
            "320x240",
            "--fps",
            "15",
            "--test-cases",
            "single_face",
            "--capacity-start",
            "2",
            "--capacity-step",
            "2",
            "--capacity-max-jobs",
            "12",
            "--window",
            "5",
            "--max-windows",
            "3",
            "--capacity-max-time",
            "480",
            "--no-live",
            "--output",
            str(report),
        ]
    )
    data = json.loads(report.read_text())
    measured = int(data["capacity"]["capacity"])
    assert measured >= 1
    runs = {r["concurrent_jobs"]: r for r in data["runs"]}
    at_limit = runs[measured]["gateway"]
    estimate = at_limit["capacity_sessions"]
    print(
        f"measured capacity {measured}; estimate there {estimate} ({at_limit['capacity_binding']}), "
        f"utilisation {at_limit['utilisation']}"
    )
    for n, r in sorted(runs.items()):
        g = r["gateway"]
        print(
            f"  n={n} p95={r['latency_ms']['p95']} slo={r['slo_met']} estimate={g['capacity_sessions']} "
            f"utilisation={g['utilisation']} binding={g['capacity_binding']}"
        )
    assert estimate is not None
    assert abs(estimate - measured) <= max(1, round(0.25 * measured)), (estimate, measured)
    over = [r["gateway"]["utilisation"] for n, r in runs.items() if n > measured]
    assert all(u is not None and u >= 0.8 for u in over), over
