"""bench/browser_uplink.py's arithmetic: windows around the rate step, rates from counters, the
shaping commands (the Chromium runs themselves are benchmarks)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from loadgen.impair import Impairment


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    import bench.browser_uplink

    return bench.browser_uplink


def sample(
    t: float, sent: int, frames: int, dropped: int, packets: int, queue_ms: float, freezes: int
) -> dict[str, Any]:
    return {
        "t_s": t,
        "browser": {"bytesSent": sent, "nackCount": int(t), "freezeCount": freezes, "pairRtt": 0.01 * t},
        "frames_in": frames,
        "uplink": {"last_window": {"queue_ms": queue_ms}},
        "uplink_qdisc": {"dropped": dropped, "packets": packets},
    }


def test_windows_split_at_the_step_and_rates_come_from_counter_deltas(bench: ModuleType) -> None:
    samples = []
    sent = frames = dropped = packets = 0
    for t in range(0, 20):
        after = t >= 10
        sent += 40_000 if after else 125_000  # 320 then 1000 kbit/s
        frames += 15
        dropped += 5 if t in (10, 11) else 0
        packets += 100
        samples.append(
            sample(float(t), sent, frames, dropped, packets, 50.0 if after else 1.0, 1 if after else 0)
        )
    summary = bench.summarise({"samples": samples, "stepped_at_s": 10.0}, warmup_s=2.0)
    before, after = summary["before"], summary["after"]
    assert before["browser_send_kbps_p50"] == 1000.0 and after["browser_send_kbps_p50"] == 320.0
    assert before["gateway_fps_p50"] == 15.0 and after["gateway_fps_p50"] == 15.0
    assert before["uplink_dropped_pct"] == 0.0
    assert after["uplink_dropped_pct"] == round(
        100 * 5 / (5 + 9 * 100), 2
    )  # 11 counted, 10's before its window
    assert before["uplink_queue_ms_p95"] == 1.0 and after["uplink_queue_ms_p50"] == 50.0
    assert before["seconds"] == 7.0 and after["seconds"] == 9.0
    assert after["nacks"] == 9 and after["processed_freezes"] == 0


def test_no_step_is_one_window(bench: ModuleType) -> None:
    samples = [sample(float(t), 1000 * t, 15 * t, 0, 10 * t, 0.5, 0) for t in range(8)]
    summary = bench.summarise({"samples": samples}, warmup_s=0.0)
    assert "after" not in summary and summary["before"]["browser_send_kbps_p50"] == 8.0


def test_link_commands(bench: ModuleType) -> None:
    link = Impairment("x", rate_kbps=600, queue_ms=200)
    (shared,) = bench.link_commands(link, shared=True)
    assert shared[:7] == ["tc", "qdisc", "add", "dev", "lo", "root", "handle"] and "600kbit" in shared
    split = bench.link_commands(link, shared=False)
    assert any("parent" in c and "10:" in c for c in split) and any("20:" in c for c in split)
    assert bench.tbf_change(400, 200, shared=False)[5:7] == ["parent", "1:10"]
    assert bench.tbf_change(400, 200, shared=True)[5] == "root" and "400kbit" in bench.tbf_change(
        400, 200, True
    )


def test_the_longest_outage_after_the_step_is_the_longest_run_of_short_seconds(bench: ModuleType) -> None:
    received = [0, 15, 30, 45, 60, 62, 64, 68, 83, 98, 103, 118]  # 15 fps; 2 s at 2-4 fps; one 5-frame second
    samples = [{"t_s": float(t), "browser": {"framesReceived": n}} for t, n in enumerate(received)]
    assert bench.longest_outage(samples, step_s=3.5) == 3.0  # seconds 4-7 (2, 2, 4 frames), not 9-10
    assert bench.longest_outage(samples, step_s=8.5) == 1.0
    steady = [{"t_s": float(t), "browser": {"framesReceived": 15 * t}} for t in range(10)]
    assert bench.longest_outage(steady, step_s=4.0) == 0.0
