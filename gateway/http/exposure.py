"""What /api/stats (and its SSE stream) add to the monitor's snapshot: source memory (issue 13, item 3)."""

from __future__ import annotations

from aiohttp import web

from gateway.http.keys import STATE


def stats_view(request: web.Request, data: dict[str, object]) -> dict[str, object]:
    """Add the source table's count and bytes (bounded by gateway.source_store)."""
    state = request.app[STATE]
    state.sources.expire()
    return {**data, "sources": state.sources.stats()}
