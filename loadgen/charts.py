"""PNG charts for the HTML report (matplotlib's Agg backend: no display, no global pyplot state).

Each function takes plain data and returns PNG bytes, so they are testable and reusable by the benchmark.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from loadgen.runner import RunResult


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return buf.getvalue()


def latency_histogram(latencies_ms: Sequence[float], budget_ms: float, title: str = "") -> bytes:
    fig = Figure(figsize=(8, 3.5))
    ax = fig.add_subplot()
    if latencies_ms:
        ax.hist(latencies_ms, bins=60, color="#4c72b0")
    ax.axvline(budget_ms, color="red", linestyle="--", label=f"budget {budget_ms:g} ms")
    ax.set_xlabel("end-to-end latency (ms)")
    ax.set_ylabel("frames")
    ax.set_title(title or "latency histogram")
    ax.legend()
    return _png(fig)


def latency_over_time(series: Mapping[int, Sequence[tuple[float, float]]], budget_ms: float) -> bytes:
    """series: job -> [(send time s, latency ms)]."""
    fig = Figure(figsize=(8, 3.5))
    ax = fig.add_subplot()
    for job, pts in sorted(series.items()):
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ".", markersize=2, label=f"job {job}")
    ax.axhline(budget_ms, color="red", linestyle="--")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title("latency over time per job")
    if 0 < len(series) <= 12:
        ax.legend(fontsize=7, markerscale=4)
    return _png(fig)


def fps_over_time(series: Mapping[int, Sequence[tuple[float, float]]], target_fps: float) -> bytes:
    fig = Figure(figsize=(8, 3.5))
    ax = fig.add_subplot()
    for job, pts in sorted(series.items()):
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"job {job}")
    ax.axhline(target_fps, color="grey", linestyle=":", label=f"sent {target_fps:g} fps")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("received fps")
    ax.set_title("fps over time")
    if 0 < len(series) <= 12:
        ax.legend(fontsize=7)
    return _png(fig)


def stage_split(stages_ms: Mapping[str, Mapping[str, float]], title: str = "stage split (mean ms)") -> bytes:
    """runs -> {stage: mean ms}: one stacked bar per run."""
    fig = Figure(figsize=(8, 3.5))
    ax = fig.add_subplot()
    runs = list(stages_ms)
    stages: list[str] = []
    for r in runs:
        for s in stages_ms[r]:
            if s not in stages:
                stages.append(s)
    bottoms = [0.0] * len(runs)
    for stage in stages:
        vals = [float(stages_ms[r].get(stage, 0.0) or 0.0) for r in runs]
        ax.bar(range(len(runs)), vals, bottom=bottoms, label=stage)
        bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
    ax.set_xticks(range(len(runs)), runs, rotation=20, fontsize=7)
    ax.set_ylabel("ms")
    ax.set_title(title)
    if stages:
        ax.legend(fontsize=7)
    return _png(fig)


def capacity_curve(
    points: Sequence[tuple[int, float | None, float]], budget_ms: float, capacity: int
) -> bytes:
    """points: (jobs, p95 ms or None, received ratio)."""
    fig = Figure(figsize=(8, 3.5))
    ax = fig.add_subplot()
    pts = sorted((n, p) for n, p, _ in points if p is not None)
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label="p95")
    ax.axhline(budget_ms, color="red", linestyle="--", label="budget")
    if capacity > 0:
        ax.axvline(capacity, color="green", linestyle=":", label=f"capacity {capacity}")
    ax2 = ax.twinx()
    ratio = sorted((n, r) for n, _, r in points)
    ax2.plot([p[0] for p in ratio], [p[1] for p in ratio], "s--", color="grey", label="received ratio")
    ax2.set_ylim(0, 1.1)
    ax.set_xlabel("concurrent jobs")
    ax.set_ylabel("p95 latency (ms)")
    ax2.set_ylabel("received / sent")
    ax.set_title("capacity search")
    ax.legend(loc="upper left", fontsize=7)
    return _png(fig)


def report_charts(
    results: Sequence[tuple[str, RunResult]],
    budget_ms: float,
    fps: float,
    capacity: Mapping[str, Any] | None,
    runs: Sequence[Mapping[str, Any]],
) -> dict[str, bytes]:
    """The HTML report's charts (title -> PNG): per run (the first 8) its latency histogram, latency and
    fps over time; the gateway's stage split; the capacity curve."""
    out: dict[str, bytes] = {}
    for name, r in results[:8]:
        samples = r.collector.samples(r.measure_start, r.measure_end)
        out[f"{name}: latency histogram"] = latency_histogram([s.latency_ms for s in samples], budget_ms)
        per_job: dict[int, list[tuple[float, float]]] = {}
        for s in r.collector.samples():
            per_job.setdefault(s.job, []).append((s.sent_t - r.t0, s.latency_ms))
        out[f"{name}: latency over time"] = latency_over_time(per_job, budget_ms)
        fps_series = {j: [(t - r.t0, v) for t, v in pts] for j, pts in r.collector.fps_series().items()}
        out[f"{name}: fps over time"] = fps_over_time(fps_series, fps)
    stages = {
        r["name"]: {
            k: v.get("mean", 0.0)
            for k, v in (r["gateway"].get("stages_ms") or {}).items()
            if isinstance(v, dict)
        }
        for r in runs
    }
    if any(stages.values()):
        out["stage split (gateway, mean ms)"] = stage_split(stages)
    if capacity is not None:
        pts = [(p["jobs"], p["p95_ms"], p["received_ratio"]) for p in capacity["points"]]
        out["capacity curve"] = capacity_curve(pts, budget_ms, capacity["capacity"])
    return out
