"""Merge reports of loadgens that ran AT THE SAME TIME against the same fleet into one report.

Why per-frame samples: a p95 over all frames cannot be computed from each loadgen's p95 (averaging
percentiles is wrong, and so is taking their max). Every report carries its runs' `latency_samples_ms`
(every returned frame's latency in the measured window, full precision), so the merged latency summary is
computed over the union of frames exactly as one big loadgen would have computed it. Counts are summed, jobs
are listed with the report they came from, fps per job is recomputed over all jobs.

Runs are matched by `name` (each loadgen ran the same steps: same test case, resolution, jobs); a run missing
from a report, or different budgets, is an error (`MergeError`, one line). Pure: dicts in, dict out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loadgen.report import SCHEMA_VERSION, build_report, latency_dict, slo_met
from loadgen.stats import LatencySummary


class MergeError(ValueError):
    """Reports that cannot be merged; str() is one line."""


def _check(reports: Sequence[dict[str, Any]]) -> None:
    if len(reports) < 2:
        raise MergeError("give at least two reports to merge")
    for i, r in enumerate(reports):
        if r.get("schema_version") != SCHEMA_VERSION or r.get("kind") != "loadgen":
            raise MergeError(f"report {i + 1} is not a loadgen report (schema {SCHEMA_VERSION})")
        for run in r.get("runs", []):
            if "latency_samples_ms" not in run:
                raise MergeError(
                    f"report {i + 1}, run {run.get('name')!r} has no per-frame samples "
                    f"(written by an older loadgen): re-run it"
                )


def merge_runs(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One run entry from the same run of several loadgens."""
    budgets = {float(r["budget_ms"]) for r in runs}
    if len(budgets) != 1:
        raise MergeError(f"run {runs[0]['name']!r}: budgets differ ({sorted(budgets)})")
    budget = budgets.pop()
    samples = [float(x) for r in runs for x in r["latency_samples_ms"]]
    latency = LatencySummary.of(samples, budget)
    frames = {
        k: sum(int(r["frames"][k]) for r in runs)
        for k in ("sent", "received", "lost", "repeated", "unreadable")
    }
    jobs = [{**j, "report": i + 1} for i, r in enumerate(runs) for j in r.get("jobs", [])]
    fps = [float(j["fps"]) for j in jobs]
    first = runs[0]
    merged: dict[str, Any] = {
        "name": first["name"],
        **{k: first.get(k) for k in ("test_case", "resolution", "fps")},
        "concurrent_jobs": sum(int(r.get("concurrent_jobs", 0)) for r in runs),
        "loadgens": len(runs),
        "duration_s": max(float(r["duration_s"]) for r in runs),
        "budget_ms": budget,
        "latency_ms": latency_dict(latency),
        "within_budget": latency.within_budget,
        "frames": frames,
        "received_ratio": round(frames["received"] / frames["sent"], 4) if frames["sent"] else 0.0,
        "fps_per_job": {
            "mean": round(sum(fps) / len(fps), 3) if fps else 0.0,
            "min": round(min(fps), 3) if fps else 0.0,
        },
        "jobs": jobs,
        "join_failures": [
            {**f, "report": i + 1} for i, r in enumerate(runs) for f in r.get("join_failures", [])
        ],
        "gateway": [r.get("gateway") for r in runs],  # each loadgen's view (maybe of different replicas)
        "slo_met": slo_met(latency.p95, budget),
        "latency_samples_ms": samples,
    }
    return merged


def merge_reports(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    _check(reports)
    names = [[run["name"] for run in r["runs"]] for r in reports]
    for i, n in enumerate(names[1:], start=2):
        if sorted(n) != sorted(names[0]):
            raise MergeError(
                f"report {i} has runs {n}, report 1 has {names[0]}: they did not run the same steps"
            )
    by_name = [{run["name"]: run for run in r["runs"]} for r in reports]
    runs = [merge_runs([b[name] for b in by_name]) for name in names[0]]
    config = {"merged_from": len(reports), "configs": [r.get("config", {}) for r in reports]}
    merged = build_report("loadgen", reports[0].get("host", {}), config, runs)
    merged["hosts"] = [r.get("host", {}) for r in reports]
    return merged
