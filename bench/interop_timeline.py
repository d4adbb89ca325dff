"""The interop matrix's timelines, pure: one run's marks from the gateway and the clients, and per case
p50/p95/max of each mark.

A run's marks, each in milliseconds:
    gateway.<mark>      after the gateway received the WHIP POST (gateway.session.timeline: answer, ice, dtls,
                        frame_in, frame_out, swap_out), read from its stats
    client.<mark>       after the client sent its POST, by its own clock: answer, connected and, for clients
                        that decode the processed video coming back (aiortc, GStreamer), first_decoded
    viewer.first_decoded  after a WHEP viewer's POST, for a viewer that joined a session already on air
    viewer.joined_after_on_air  when that viewer POSTed, after the session's first processed frame went out
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loadgen.percentiles import percentiles

ON_AIR_MARK = "frame_out"


def run_marks(
    gateway: Mapping[str, Any] | None,
    client: Mapping[str, Any] | None,
    viewer_first_ms: float | None = None,
    viewer_after_on_air_ms: float | None = None,
) -> dict[str, float]:
    """One run's marks (see the module docstring); values that are missing or not numbers are left out."""
    marks: dict[str, float] = {}
    for prefix, found in (("gateway", gateway), ("client", client)):
        for name, value in (found or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool) and name != "post":
                marks[f"{prefix}.{name}"] = float(value)
    if viewer_first_ms is not None:
        marks["viewer.first_decoded"] = float(viewer_first_ms)
    if viewer_after_on_air_ms is not None:
        marks["viewer.joined_after_on_air"] = float(viewer_after_on_air_ms)
    return marks


def summarize_marks(runs: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per mark, over the runs that have it: n, p50, p95, max (ms, one decimal)."""
    names: list[str] = []
    for marks in runs:
        names.extend(name for name in marks if name not in names)
    table: dict[str, dict[str, float]] = {}
    for name in names:
        values = [marks[name] for marks in runs if name in marks]
        p50, p95 = percentiles(values, (50, 95))
        table[name] = {
            "n": len(values),
            "p50": round(p50, 1),
            "p95": round(p95, 1),
            "max": round(max(values), 1),
        }
    return table


def format_table(case: str, table: Mapping[str, Mapping[str, float]]) -> list[str]:
    """The lines a reader scans: one per mark, p50 / p95 / max in ms."""
    lines = [f"  {case}"]
    for name, row in table.items():
        stats = f"p50 {row['p50']:7.1f}  p95 {row['p95']:7.1f}  max {row['max']:7.1f}"
        lines.append(f"    {name:<30} n={int(row['n']):<3} {stats}")
    return lines
