"""The load generator's /api/stats poller keeps what a report needs, not every answer of a long run."""

from __future__ import annotations

from typing import Any

import aiohttp

from loadgen.runner import StatsPoller


class _Answer:
    def __init__(self, body: dict[str, Any]) -> None:
        self.status = 200
        self._body = body

    async def __aenter__(self) -> _Answer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def json(self, content_type: str | None = None) -> dict[str, Any]:
        return self._body


class _Http:
    """Answers like a gateway whose /api/stats carries a dashboard series (tens of kB each in real life)."""

    def __init__(self) -> None:
        self.calls = 0

    def get(self, url: str, headers: dict[str, str], timeout: aiohttp.ClientTimeout) -> _Answer:
        self.calls += 1
        series = [{"t": float(i)} for i in range(300)]
        return _Answer({"schema_version": 1, "n": self.calls, "series": series})


async def test_hours_of_polls_keep_the_marked_answers_and_a_few_recent_ones() -> None:
    http = _Http()
    poller = StatsPoller(http, "http://127.0.0.1:1", {}, interval_s=2.0, keep_recent=8)  # type: ignore[arg-type]
    first = await poller.fetch(keep=True)  # the measurement's start
    for _ in range(3 * 3600 // 2):  # three hours at one poll every 2 s
        await poller.fetch()
    last = await poller.fetch(keep=True)  # its end
    assert first is not None and last is not None
    samples = poller.samples
    assert len(samples) <= 1 + 8
    assert samples[0][1] is first and samples[-1][1] is last
    assert [s[0] for s in samples] == sorted(s[0] for s in samples)
    assert poller.latest is last and poller.latest["n"] == http.calls
