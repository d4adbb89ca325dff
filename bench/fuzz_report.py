"""The fuzz rig's report, pure: what an attack changed against the quiet windows, what a window added to
the gateway's counters, the problems that fail a run, and the lines the command line prints.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def change_vs_quiet(attacked: dict[str, Any], quiet: dict[str, Any]) -> dict[str, float | None]:
    """fps, p50 and p95 during the attack against the quiet windows, in per cent (+ = higher)."""
    out: dict[str, float | None] = {}
    for key in ("fps", "p50_ms", "p95_ms"):
        a, q = attacked.get(key), quiet.get(key)
        out[key] = round(100.0 * (a - q) / q, 1) if a is not None and q else None
    return out


def delta(after: Any, before: Any) -> Any:
    """after - before, key by key, for nested dicts of counters (what a window added)."""
    if isinstance(after, dict):
        base = before if isinstance(before, dict) else {}
        return {k: v if k.startswith("loop_lag") else delta(v, base.get(k)) for k, v in after.items()}
    if isinstance(after, int | float) and not isinstance(after, bool):
        return after - (before if isinstance(before, int | float) else 0)
    return after


def _front_part(kind: dict[str, Any]) -> str:
    other = kind.get("other_cpu_ms_per_request")
    return "" if other is None else f" (+ front process {other:.2f})"


def problems(report: dict[str, Any]) -> list[str]:
    """What fails the run: any 5xx answered, the gateway dead at the end, a restart that carried no frames."""
    found = []
    fuzz_results = [r["fuzz"] for r in report.get("rounds", [])] + (
        [report["fuzz"]] if "fuzz" in report else []
    )
    for r in fuzz_results:
        if r["five_xx"]:
            found.append(f"{r['five_xx']} server errors: {r['server_errors'][:3]}")
    if report.get("gateway_alive_at_end") is False:
        found.append("the gateway died")
    for c in report.get("cycles", []):
        if c["frames_before_kill"] == 0:
            found.append("a restarted gateway carried no live frames")
    return found


def report_lines(report: dict[str, Any]) -> Iterator[str]:
    """What the command line prints of a report, mode by mode, then the gateway process's trend."""

    def live(w: dict[str, Any]) -> str:
        return (
            f"fps {w['fps']:.1f}  p50 {w['p50_ms'] or float('nan'):.1f} ms"
            f"  p95 {w['p95_ms'] or float('nan'):.1f} ms  loss {100 * w['loss']:.1f} %"
            f"  ({w['received']}/{w['sent']}; of the rest {w.get('unreadable', 0)} came back unreadable,"
            f" {w.get('missing', 0)} never came back; publisher's encoder target kbit/s"
            f" {w.get('uplink_target_kbps')})"
        )

    if report["mode"] == "fuzz":
        yield f"settled    : the publisher's rate held steady after {report['settled_after_s']} s"
        yield f"quiet      : {live(report['quiet'])}"
        if report.get("quiet_after"):
            yield f"quiet after: {live(report['quiet_after'])}"
            yield f"quiet, both: {live(report['quiet_pooled'])}"
        for i, r in enumerate(report["rounds"], 1):
            f = r["fuzz"]
            yield (
                f"round {i}    : {f['requests']} requests in {f['duration_s']} s, 5xx {f['five_xx']}, "
                f"statuses {f['statuses']}, transport {f['transport_errors']}, "
                f"attacker CPU {f.get('attacker_cpu_s')} s"
            )
            yield f"  attacked : {live(r['live'])}"
            c = r["change_vs_quiet"]
            yield f"  change   : fps {c['fps']:+} %  p50 {c['p50_ms']:+} %  p95 {c['p95_ms']:+} %"
            yield f"  gateway  : quiet {report.get('quiet_gateway_counters')}"
            yield f"             attacked {r.get('gateway_counters')}"
    elif report["mode"] == "soak":
        f = report["fuzz"]
        yield (
            f"soak       : {f['requests']} requests in {f['duration_s']} s, 5xx {f['five_xx']}, "
            f"statuses {f['statuses']}"
        )
        for w in report["live_windows"]:
            yield f"  t={w['t_s']:>6}s {live(w)}"
    elif report["mode"] == "cost":
        for k in report["kinds"]:
            yield (
                f"{k['kind']:9}: {k['requests']:5} requests, gateway CPU "
                f"{k['cpu_ms_per_request']:6.2f} ms/request{_front_part(k)}, "
                f"answer p50 {k['wall_ms_p50']:.1f} ms "
                f"max {k['wall_ms_max']:.0f} ms, after {k['after_cpu_pct']:.0f} % CPU; "
                f"by status {k['cpu_ms_by_status']}; costliest {k['cpu_ms_top']}"
            )
    else:
        for i, c in enumerate(report["cycles"], 1):
            yield (
                f"kill -9 cycle {i}: ready in {c['ready_s']} s, {c['frames_before_kill']} live frames, "
                f"exit {c['exit']}"
            )
    proc = report.get("process") or {}
    for name in ("rss_bytes", "fds", "threads"):
        if name in proc:
            p = proc[name]
            yield f"{name:10} : start {p['start']}  end {p['end']}  max {p['max']}  per min {p['per_min']}"
