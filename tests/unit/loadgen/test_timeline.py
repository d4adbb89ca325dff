"""The way-on-air marks' summaries (loadgen.timeline), pure."""

from __future__ import annotations

from loadgen.timeline import gateway_timelines, summarize_marks


def test_summaries_per_mark_over_the_runs_that_have_it() -> None:
    runs = [{"a": 10.0, "b": 100.0}, {"a": 20.0}, {"a": 30.0, "b": 300.0}]
    table = summarize_marks(runs)
    assert list(table) == ["a", "b"]
    assert table["a"] == {"n": 3, "p50": 20.0, "p95": 29.0, "max": 30.0}
    assert table["b"]["n"] == 2 and table["b"]["max"] == 300.0


def test_the_gateway_timelines_come_from_its_session_list() -> None:
    stats = {
        "sessions": {
            "list": [
                {"info": {"timeline_ms": {"post": 0.0, "answer": 4.0, "dtls": 90.5}}},
                {"info": {"user_agent": "x"}},  # no timeline yet
            ]
        }
    }
    assert gateway_timelines(stats) == [{"answer": 4.0, "dtls": 90.5}]
    assert gateway_timelines(None) == [] and gateway_timelines({"sessions": {}}) == []
