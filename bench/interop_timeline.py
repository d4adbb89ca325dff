"""The interop matrix's timelines, pure: one run's marks from the gateway and the clients, and per case
p50/p95/max of each mark.

A run's marks, each in milliseconds:
    gateway.<mark>      after the gateway received the WHIP POST (gateway.session.timeline: answer, ice, dtls,
                        frame_in, frame_out, swap_out), read from its stats
    client.<mark>       after the client sent its POST, by its own clock: answer, connected and, for the
                        clients that decode the processed video coming back (aiortc, GStreamer, Chromium),
                        first_decoded
    viewer.first_decoded  after a WHEP viewer's POST, for a viewer that joined a session already on air
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loadgen.timeline import format_marks, summarize_marks

__all__ = ["ON_AIR_MARK", "format_table", "run_marks", "summarize_marks"]

ON_AIR_MARK = "frame_out"


def run_marks(
    gateway: Mapping[str, Any] | None,
    client: Mapping[str, Any] | None,
    viewer_first_ms: float | None = None,
) -> dict[str, float]:
    """One run's marks (see the module docstring); values that are missing or not numbers are left out."""
    marks: dict[str, float] = {}
    for prefix, found in (("gateway", gateway), ("client", client)):
        for name, value in (found or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool) and name != "post":
                marks[f"{prefix}.{name}"] = float(value)
    if viewer_first_ms is not None:
        marks["viewer.first_decoded"] = float(viewer_first_ms)
    return marks


def format_table(case: str, table: Mapping[str, Mapping[str, float]]) -> list[str]:
    """The lines a reader scans: the case, then one per mark, p50 / p95 / max in ms."""
    return [f"  {case}", *format_marks(table)]
