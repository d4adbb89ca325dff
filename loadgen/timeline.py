"""The way on air, summarized: per mark, p50 / p95 / max over sessions. Pure.

Marks are milliseconds after a POST: the gateway's (gateway.session.timeline, read from its stats: answer,
ice, dtls, frame_in, frame_out, swap_out) after it received the POST, a client's (answer, connected,
first_decoded, viewer_first_decoded) after it sent it. `loadgen run` and the interop matrix (bench.interop)
report both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loadgen.percentiles import percentiles


def summarize_marks(runs: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per mark, over the runs that have it: n, p50, p95, max (ms, one decimal), marks in first-seen order."""
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


def gateway_timelines(stats: Mapping[str, Any] | None) -> list[dict[str, float]]:
    """Every session's timeline in a gateway /api/stats snapshot (its session list), the POST left out."""
    sessions = (stats or {}).get("sessions", {})
    entries = sessions.get("list", []) if isinstance(sessions, Mapping) else []
    found: list[dict[str, float]] = []
    for entry in entries:
        info = entry.get("info", {}) if isinstance(entry, Mapping) else {}
        marks = info.get("timeline_ms") if isinstance(info, Mapping) else None
        if isinstance(marks, Mapping):
            found.append(
                {
                    str(k): float(v)
                    for k, v in marks.items()
                    if k != "post" and isinstance(v, int | float) and not isinstance(v, bool)
                }
            )
    return found


def format_marks(table: Mapping[str, Mapping[str, float]]) -> list[str]:
    """One line per mark: n, p50 / p95 / max in ms."""
    lines = []
    for name, row in table.items():
        stats = f"p50 {row['p50']:7.1f}  p95 {row['p95']:7.1f}  max {row['max']:7.1f}"
        lines.append(f"    {name:<30} n={int(row['n']):<3} {stats}")
    return lines
