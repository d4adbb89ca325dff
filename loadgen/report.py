"""Format functions: run data in, JSON / CSV / HTML out. One report schema (schema_version 1) for live runs
and the benchmark; its fields: docs/ARCHITECTURE.md "The report".
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import html
import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loadgen.runner import RunResult, gateway_window
from loadgen.stats import LatencySummary, OffsetSummary
from loadgen.timeline import gateway_timelines, summarize_marks

SCHEMA_VERSION = 1


def latency_dict(s: LatencySummary) -> dict[str, Any]:
    return {
        k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(s).items() if k != "within_budget"
    }


def slo_met(p95_ms: float | None, budget_ms: float) -> bool:
    return p95_ms is not None and p95_ms <= budget_ms


def loadgen_run_entry(name: str, result: RunResult, meta: dict[str, Any]) -> dict[str, Any]:
    """One run's report entry; `meta` carries test_case, resolution, fps, jobs, batch_size requested."""
    s = result.summary
    first = None
    last = None
    for t, snap in result.gateway_stats:
        if t >= result.measure_start - 0.5 and first is None:
            first = snap
        if t <= result.measure_end + 3.0:
            last = snap
    gw = gateway_window(first, last)
    requested = meta.get("batch_size")
    entry: dict[str, Any] = {
        "name": name,
        **meta,
        "batch_size": {"requested": requested, "observed": gw.get("max_batch_observed")},
        "duration_s": round(result.measure_end - result.measure_start, 3),
        "budget_ms": s.budget_ms,
        "latency_ms": latency_dict(s.latency),
        "within_budget": s.latency.within_budget,
        "frames": {
            "sent": s.sent,
            "received": s.received,
            "lost": s.lost,
            "repeated": s.repeated,
            "unreadable": s.unreadable,
        },
        "received_ratio": round(s.received_ratio, 4),
        "fps_per_job": {"mean": round(s.fps_per_job_mean, 3), "min": round(s.fps_per_job_min, 3)},
        **({"picture_psnr_db": _offsets(s.picture_psnr_db)} if s.picture_psnr_db is not None else {}),
        "jobs": [
            {
                "job": j.job,
                "sent": j.sent,
                "received": j.received,
                "lost": j.lost,
                "repeated": j.repeated,
                "fps": round(j.received_fps, 3),
                "p95_ms": j.latency.p95,
                **({"av_offset_ms": _offsets(j.av_offset_ms)} if j.av_offset_ms is not None else {}),
            }
            for j in s.jobs
        ],
        "join_failures": result.join_failures,
        # the way on air: each job's own marks after its POST, each session's gateway marks after the POST
        # arrived (loadgen.timeline)
        "timeline_ms": {
            "client": summarize_marks(result.collector.timelines()),
            "gateway": summarize_marks(gateway_timelines(_last_snapshot(result))),
        },
        "windows": [
            {"p95_ms": w.latency.p95, "received_ratio": round(w.received_ratio, 4)} for w in result.windows
        ],
        "gateway": gw,
        "gateway_errors": result.gateway_errors,
        "slo_met": slo_met(s.latency.p95, s.budget_ms),
        # every returned frame's latency in the measured window, full precision: what `loadgen merge` needs
        # for exact percentiles over several loadgens (percentiles of percentiles would be wrong)
        "latency_samples_ms": [
            smp.latency_ms for smp in result.collector.samples(result.measure_start, result.measure_end)
        ],
    }
    return entry


def _last_snapshot(result: RunResult) -> dict[str, Any] | None:
    """The newest gateway stats the run kept (its sessions' timelines are complete by then)."""
    return result.gateway_stats[-1][1] if result.gateway_stats else None


def _offsets(o: OffsetSummary) -> dict[str, Any]:
    return {
        "count": o.count,
        "p5": round(o.p5, 1),
        "p50": round(o.p50, 1),
        "p95": round(o.p95, 1),
        "min": round(o.min, 1),
        "max": round(o.max, 1),
    }


def build_report(
    kind: str,
    host: dict[str, Any],
    config: dict[str, Any],
    runs: Sequence[dict[str, Any]],
    capacity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": host,
        "config": config,
        "runs": list(runs),
        "slo_met": bool(runs) and all(r.get("slo_met", False) for r in runs),
    }
    if capacity is not None:
        report["capacity"] = capacity
        report["slo_met"] = capacity.get("capacity", 0) > 0
    return report


def _jsonable(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, set | tuple):
        return list(o)
    if isinstance(o, float) and o != o:
        return None
    if dataclasses.is_dataclass(o) and not isinstance(o, type):  # e.g. the --network impairment
        return dataclasses.asdict(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def clean(o: Any) -> Any:
    """NaN/inf become null (strict JSON), tuples become lists, recursively."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {str(k): clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [clean(v) for v in o]
    return o


def write_json(report: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(clean(report), indent=2, default=_jsonable, allow_nan=False)
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_text(text)
    tmp.replace(path)


CSV_FIELDS = ("run", "job", "frame_id", "sent_s", "recv_s", "latency_ms")


def write_csv(rows: Sequence[tuple[str, RunResult]], path: Path) -> int:
    """Per-frame samples of every run (times relative to the run's start). Returns the row count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for name, result in rows:
            for s in result.collector.samples():
                w.writerow(
                    [
                        name,
                        s.job,
                        s.frame_id,
                        f"{s.sent_t - result.t0:.4f}",
                        f"{s.recv_t - result.t0:.4f}",
                        f"{s.latency_ms:.3f}",
                    ]
                )
                n += 1
    return n


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}"
    return html.escape(str(v))


def write_html(report: dict[str, Any], charts: dict[str, bytes], path: Path) -> None:
    """One self-contained HTML file (charts inlined as PNG data URIs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    host = report.get("host", {})
    rows = []
    for r in report.get("runs", []):
        lat = r.get("latency_ms", {})
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{_fmt(x)}</td>"
                for x in (
                    r.get("name"),
                    r.get("concurrent_jobs"),
                    lat.get("p50"),
                    lat.get("p95"),
                    lat.get("p99"),
                    (r.get("frames") or {}).get("lost"),
                    (r.get("fps_per_job") or {}).get("mean"),
                    "yes" if r.get("slo_met") else "NO",
                )
            )
            + "</tr>"
        )
    imgs = "".join(
        f'<h3>{html.escape(title)}</h3><img src="data:image/png;base64,{base64.b64encode(png).decode()}">'
        for title, png in charts.items()
    )
    cap = report.get("capacity")
    cap_html = (
        f"<p><b>Capacity:</b> {_fmt(cap.get('capacity'))} concurrent jobs within the SLO</p>" if cap else ""
    )
    kind = html.escape(report["kind"])
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>livefuse {kind}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;
padding:4px 8px;text-align:right}}img{{max-width:900px;display:block}}</style></head><body>
<h1>livefuse {kind} report</h1>
<p>{_fmt(report.get("created"))} &middot; {_fmt(host.get("cpu_model"))}
&middot; {_fmt(host.get("cpu_logical"))} CPUs
&middot; SLO met: <b>{"yes" if report.get("slo_met") else "NO"}</b></p>{cap_html}
<table><tr><th>run</th><th>jobs</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>lost</th><th>fps/job</th>
<th>SLO</th></tr>{"".join(rows)}</table>{imgs}
<h3>Full report</h3><pre>{html.escape(json.dumps(report, indent=1, default=_jsonable)[:200_000])}</pre>
</body></html>"""
    path.write_text(page)
