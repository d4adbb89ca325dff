"""The interop matrix's cases and its summary, pure: which client publishes or views, with audio or not,
how many runs, on a busy core or not (`preset`), and per case connected/total and passed/total.

Apart from the runs (bench.interop) so that the test suite names its cases from the same preset the command
line runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from bench.interop_timeline import summarize_marks


@dataclass(frozen=True)
class Case:
    name: str
    client: str  # aiortc | ffmpeg | libdatachannel | gstreamer | chromium
    role: str = "publish"  # publish | view
    audio: bool = False
    runs: int = 1
    busy: bool = False  # one core held by a busy loop during these runs
    seconds: float = 2.0
    client_log: str = "Warning"  # libdatachannel's log level (Verbose..Fatal): its tail is kept with each run
    publisher: str = "aiortc"  # a viewer case: who publishes the session it watches


@dataclass
class RunOutcome:
    connected: bool
    passed: bool
    why: str = ""
    frames_in: int = 0
    frames_out: int = 0
    viewer_audio: int = 0
    viewer_frames: int = 0
    close_reason: str = ""
    user_agent: str = ""
    client: dict[str, Any] = field(default_factory=dict)
    timeline: dict[str, float] = field(default_factory=dict)  # ms per mark (bench.interop_timeline)


def preset(name: str, runs: int | None, busy: bool, client_log: str = "Warning") -> list[Case]:
    """The cases of a preset; `runs` overrides every case's count, `busy` holds a core for all of them."""
    suite = [
        Case("aiortc VP8+Opus", "aiortc", audio=True),
        Case("FFmpeg H.264", "ffmpeg"),
        Case("FFmpeg H.264+Opus", "ffmpeg", audio=True),
        Case("libdatachannel H.264", "libdatachannel"),
        Case(
            "libdatachannel H.264+Opus (OBS), core busy",
            "libdatachannel",
            audio=True,
            runs=12,
            busy=True,
            seconds=1.5,
        ),
        Case("libdatachannel WHEP viewer", "libdatachannel", role="view", audio=True, runs=2),
        Case(
            "libdatachannel WHEP viewer of an OBS-style H.264 session",
            "libdatachannel",
            role="view",
            audio=True,
            publisher="libdatachannel",
        ),
        Case("GStreamer webrtcbin VP8", "gstreamer", seconds=4.0),
    ]
    if name == "full":  # Chromium too (the suite has its own browser test): the gateway's /demo page
        suite.append(Case("Chromium VP8 (the /demo page, 640x360)", "chromium", seconds=2.0))
        suite = [replace(c, runs=50 if c.busy else 10) for c in suite]  # the OBS-style case: 50
    cases = [replace(c, runs=runs) if runs is not None else c for c in suite]
    return [replace(c, busy=c.busy or busy, client_log=client_log) for c in cases]


def summarize(cases: list[Case], outcomes: dict[str, list[RunOutcome]]) -> list[dict[str, Any]]:
    """Per case: connected/total and passed/total (pure)."""
    rows = []
    for case in cases:
        runs = outcomes.get(case.name, [])
        rows.append(
            {
                "case": case.name,
                "client": case.client,
                "role": case.role,
                "audio": case.audio,
                "busy": case.busy,
                "total": len(runs),
                "connected": sum(r.connected for r in runs),
                "passed": sum(r.passed for r in runs),
                "failures": [r.why for r in runs if not r.passed][:5],
                "timeline_ms": summarize_marks([r.timeline for r in runs if r.timeline]),
            }
        )
    return rows
