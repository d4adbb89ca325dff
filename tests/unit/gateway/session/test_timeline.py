"""The way-on-air marks (gateway.session.timeline) and their summaries (loadgen.timeline), pure."""

from __future__ import annotations

import pytest

from bench.interop_timeline import run_marks
from gateway.session.timeline import ANSWER, DTLS, FRAME_OUT, ICE, Timeline
from loadgen.timeline import gateway_timelines, summarize_marks


def test_each_mark_is_kept_once_in_ms_after_the_post() -> None:
    timeline = Timeline(post_s=10.0)
    assert timeline.mark(DTLS, 10.25) and timeline.mark(ANSWER, 10.005) and timeline.mark(ICE, 10.1)
    assert not timeline.mark(DTLS, 11.0)  # the first time stands
    assert timeline.as_ms() == {"post": 0.0, ANSWER: 5.0, ICE: 100.0, DTLS: 250.0}  # in the marks' order
    assert timeline.has(DTLS) and not timeline.has(FRAME_OUT)


def test_an_unknown_mark_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown timeline mark"):
        Timeline(0.0).mark("first_frame", 1.0)


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


def test_one_interop_run_names_whose_clock_each_mark_is_on() -> None:
    marks = run_marks({"post": 0.0, "dtls": 90.0}, {"connected": 95.0, "note": "x"}, viewer_first_ms=40.0)
    assert marks == {"gateway.dtls": 90.0, "client.connected": 95.0, "viewer.first_decoded": 40.0}
