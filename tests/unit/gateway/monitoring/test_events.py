"""Events: bounded ring, JSONL file, rotation by size, failures swallowed, rate limiting."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from gateway.monitoring.events import EventLog, JsonlRotatingWriter, RateLimiter
from gateway.monitoring.monitor import Monitor, MonitorConfig


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_ring_keeps_only_the_latest_events() -> None:
    log = EventLog(capacity=5)
    for i in range(12):
        log.emit(float(i), "k" if i % 2 else "j", f"event {i}", {"i": i})
    recent = log.recent()
    assert [e.seq for e in recent] == [8, 9, 10, 11, 12]
    assert [e.data["i"] for e in log.recent(2)] == [10, 11]
    assert log.counts_by_kind() == {"j": 6, "k": 6}


def test_events_reach_the_jsonl_file_and_rotate_by_size(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "events.jsonl"
    writer = JsonlRotatingWriter(path, max_bytes=600, backups=3)
    log = EventLog(capacity=10, writer=writer)
    for i in range(60):
        log.emit(float(i), "drops", f"session s{i} dropped frames", {"i": i})
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["events.jsonl", "events.jsonl.1", "events.jsonl.2", "events.jsonl.3"]
    assert writer.rotations > 3
    for p in path.parent.iterdir():
        assert p.stat().st_size <= 600
    newest = _lines(path)
    assert newest[-1]["data"] == {"i": 59} and newest[-1]["kind"] == "drops"
    # backups are in order: .1 holds the lines just before the current file's
    prev = _lines(path.with_name("events.jsonl.1"))
    assert prev[-1]["seq"] == newest[0]["seq"] - 1  # type: ignore[operator]


def test_write_failure_is_counted_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "events.jsonl"
    blocker.mkdir()  # a directory where the file should be
    log = EventLog(capacity=3, writer=JsonlRotatingWriter(blocker))
    log.emit(0.0, "x", "still recorded in memory")
    assert log.write_errors == 1
    assert log.recent()[0].message == "still recorded in memory"


def test_rate_limiter_counts_what_it_suppressed() -> None:
    lim = RateLimiter(interval_s=5.0)
    assert lim.allow("a", 0.0)
    assert not lim.allow("a", 1.0)
    assert not lim.allow("a", 4.9)
    assert lim.allow("b", 1.0)
    assert lim.allow("a", 5.0)
    assert lim.take_suppressed("a") == 2
    assert lim.take_suppressed("a") == 0


async def test_monitor_writes_session_and_custom_events_to_file(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    mon = Monitor(MonitorConfig(event_log=path, nvml=False, sample_interval_s=0.05))
    await mon.start()
    mon.session_opened("s1", {"remote": "127.0.0.1"})
    mon.record_reject("capacity")
    mon.event("out_of_memory", "CUDA OOM in face_swapper", stage="face_swapper")
    mon.session_closed("s1", "client_left")
    await asyncio.sleep(0.01)
    await mon.close()
    kinds = [e["kind"] for e in _lines(path)]
    assert kinds == ["session_open", "reject", "out_of_memory", "session_close"]
    assert _lines(path)[2]["data"] == {"stage": "face_swapper"}
    mon.event("late", "after close: kept in memory, not written")
    assert [e["kind"] for e in _lines(path)][-1] == "session_close"
