"""`loadgen merge`: two loadgens run at the same time against one gateway (real aiortc peers, two VP8 hops
through the echo gateway of test_loadgen); the merged report's statistics must be those of the union of
their frames — exact percentiles over every frame, summed counts — not an average of the two reports."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from loadgen.cli import main
from loadgen.client import ClientConfig
from loadgen.merge import MergeError, merge_reports
from loadgen.report import build_report, loadgen_run_entry, write_json
from loadgen.runner import RunConfig, run_point
from loadgen.stats import LatencySummary
from loadgen.synth import SynthConfig, build_loop

BUDGET_MS = 60.0  # near the echo's latency, so "within budget" is a real fraction, not 0 or 1


async def test_merge_of_two_real_runs_is_their_union(
    echo_gateway: tuple[str, dict[str, int]],
    media_dir: Path,
    tmp_path: Path,
) -> None:
    url, _ = echo_gateway
    loop = build_loop(SynthConfig(320, 240, 15, "single_face", loop_frames=10), media_dir)

    def cfg(jobs: int) -> RunConfig:
        return RunConfig(
            concurrent_jobs=jobs,
            fps=15,
            warmup_s=0.5,
            ramp_up_rate=10,
            window_s=3.0,
            max_measure_s=3.0,
            stats_interval_s=1.0,
            budget_ms=BUDGET_MS,
        )

    results = await asyncio.gather(
        run_point(url, loop, cfg(1), ClientConfig(url=url, source_id="src1")),
        run_point(url, loop, cfg(2), ClientConfig(url=url, source_id="src1")),
    )
    paths = []
    for i, result in enumerate(results):
        meta = {
            "test_case": "single_face",
            "resolution": "320x240",
            "fps": 15,
            "concurrent_jobs": len(result.summary.jobs),
            "batch_size": None,
        }
        entry = loadgen_run_entry("r", result, meta)
        report = build_report("loadgen", {"cpu_logical": 2}, {"loadgen": i}, [entry])
        paths.append(tmp_path / f"r{i}.json")
        write_json(report, paths[-1])

    out = tmp_path / "all.json"
    code = main(["merge", str(paths[0]), str(paths[1]), "--output", str(out)])
    assert code in (0, 1)
    merged = json.loads(out.read_text())
    run = merged["runs"][0]

    union = [smp.latency_ms for r in results for smp in r.collector.samples(r.measure_start, r.measure_end)]
    assert len(union) > 40
    want = LatencySummary.of(union, BUDGET_MS)
    lat = run["latency_ms"]
    assert lat["count"] == want.count == sum(r.summary.received for r in results)
    for k in ("p50", "p90", "p95", "p99", "mean", "max"):
        assert lat[k] == pytest.approx(getattr(want, k), abs=1e-3), k
    assert run["within_budget"] == pytest.approx(want.within_budget)
    assert run["frames"]["sent"] == sum(r.summary.sent for r in results)
    assert run["frames"]["lost"] == sum(r.summary.lost for r in results)
    assert run["concurrent_jobs"] == 3 and len(run["jobs"]) == 3
    assert run["slo_met"] == (want.p95 is not None and want.p95 <= BUDGET_MS)
    # the merge is the percentile of the union, not an average of the two reports' percentiles
    assert float(np.percentile(union, 95)) == pytest.approx(lat["p95"], abs=1e-3)

    bad = json.loads(paths[1].read_text())
    bad["runs"][0]["budget_ms"] = 999.0
    with pytest.raises(MergeError, match="budgets differ"):
        merge_reports([json.loads(paths[0].read_text()), bad])
    del bad["runs"][0]["latency_samples_ms"]
    with pytest.raises(MergeError, match="no per-frame samples"):
        merge_reports([json.loads(paths[0].read_text()), bad])
    assert main(["merge", str(paths[0]), "--output", str(out)]) == 2
