"""One interop run's way-on-air marks, each named for the clock it is on (bench.interop_timeline)."""

from __future__ import annotations

from bench.interop_timeline import run_marks


def test_one_interop_run_names_whose_clock_each_mark_is_on() -> None:
    marks = run_marks({"post": 0.0, "dtls": 90.0}, {"connected": 95.0, "note": "x"}, viewer_first_ms=40.0)
    assert marks == {"gateway.dtls": 90.0, "client.connected": 95.0, "viewer.first_decoded": 40.0}
