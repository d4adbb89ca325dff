"""What the monitor itself costs: `python -m gateway.monitoring.costbench [--seconds 20] [--sessions 4]
[--fps 30]`.

Runs the real Monitor (sampler thread at the configured interval, loop-lag task, one SSE-like snapshot per
second, a /metrics render per second) fed with synthetic FrameRecords at sessions x fps, and reports its CPU
two
ways: the monitor's own accounting (sampler thread CPU + record_frame + snapshot time) and the process CPU of
the same run minus a baseline run that makes the same records without a monitor. Target: < 5% of one core at
1 s
sampling. Writes JSON (default reports/monitor_cost.json). A CLI: the only module here that prints.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from .monitor import Monitor, MonitorConfig
from .prometheus import make_registry, render
from .records import FrameRecord, Outcome

_STAGES = {
    "decode": 0.6,
    "queue_wait": 4.0,
    "face_detector": 9.0,
    "face_landmarker": 4.0,
    "face_swapper": 20.0,
    "paste_back": 2.0,
    "encode": 2.1,
}
_BATCH = {"face_detector": 4, "face_landmarker": 4, "face_swapper": 4}


async def _drive(monitor: Monitor | None, seconds: float, sessions: int, fps: float) -> tuple[float, int]:
    """Feed frames (and, with a monitor, 1 Hz snapshot + metrics render); return (process CPU s, frames)."""
    if monitor is not None:
        await monitor.start()
        for s in range(sessions):
            monitor.session_opened(f"s{s}", {})
    cpu0 = time.process_time()
    t0 = time.monotonic()
    n = 0
    next_report = t0 + 1.0
    tick = 1.0 / fps
    while time.monotonic() - t0 < seconds:
        for s in range(sessions):
            rec = FrameRecord(
                session_id=f"s{s}",
                frame_id=n,
                arrival_s=time.monotonic(),
                outcome=Outcome.PROCESSED if n % 20 else Outcome.DROPPED_STALE,
                server_ms=40.0 + (n % 30),
                stages_ms=dict(_STAGES),
                batch_sizes=dict(_BATCH),
                faces=1,
                width=640,
                height=360,
            )
            if monitor is not None:
                monitor.record_frame(rec)
        n += 1
        if monitor is not None and time.monotonic() >= next_report:
            json.dumps(monitor.snapshot_dict())  # the dashboard's SSE message
            render(make_registry(monitor.snapshot))  # a Prometheus scrape
            next_report += 1.0
        await asyncio.sleep(tick)
    cpu = time.process_time() - cpu0
    if monitor is not None:
        await monitor.close()
    return cpu, n * sessions


async def run(seconds: float, sessions: int, fps: float, interval_s: float) -> dict[str, object]:
    base_cpu, frames = await _drive(None, seconds, sessions, fps)
    mon = Monitor(MonitorConfig(sample_interval_s=interval_s, adaptive_sampling=False))
    mon_cpu, _ = await _drive(mon, seconds, sessions, fps)
    cost = mon.snapshot().monitor
    assert cost is not None
    return {
        "seconds": seconds,
        "sessions": sessions,
        "fps_per_session": fps,
        "sample_interval_s": interval_s,
        "frames": frames,
        "samples": cost.samples,
        "self_reported_cpu_fraction_of_core": round(cost.cpu_fraction_of_core, 5),
        "sampler_cpu_s": round(cost.sampler_cpu_s, 4),
        "record_cpu_s": round(cost.record_cpu_s, 4),
        "snapshot_cpu_s": round(cost.snapshot_cpu_s, 4),
        "record_us_per_frame": round(cost.record_us_per_frame, 2),
        "process_cpu_s_without_monitor": round(base_cpu, 4),
        "process_cpu_s_with_monitor": round(mon_cpu, 4),
        "differential_cpu_fraction_of_core": round(max(0.0, mon_cpu - base_cpu) / seconds, 5),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--output", type=Path, default=Path("reports/monitor_cost.json"))
    args = ap.parse_args(argv)
    result = asyncio.run(run(args.seconds, args.sessions, args.fps, args.interval))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    for k, v in result.items():
        print(f"{k:40s} {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
