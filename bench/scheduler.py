#!/usr/bin/env python3
"""Micro-benchmark: what does the cross-session scheduler itself cost per frame?

The process function is a no-op, so everything measured is scheduling overhead: the pure policy
(submit/schedule/complete), and the async runner (futures, call_soon pump, executor hop to a worker thread
and back). A bare `run_in_executor` per frame is measured as the floor the runner is compared against.
Bounded: a fixed frame count per case. Prints a table and writes JSON.

    .venv/bin/python -m bench.scheduler --frames 2000 --sessions 1 4 16 \
        --output reports/bench_scheduler.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from engines.frames import FrameItem, FrameOutput
from gateway.monitoring.records import Outcome
from gateway.scheduler import FrameScheduler, SchedulerConfig
from gateway.scheduler.policy import BatchPolicy
from loadgen.percentiles import percentiles

_IMAGE = np.zeros((2, 2, 3), dtype=np.uint8)
_OUTPUT = FrameOutput(image=_IMAGE, faces=0)


def _noop(items: list[FrameItem]) -> list[FrameOutput]:
    return [_OUTPUT] * len(items)


def _latency(latencies_ms: Sequence[float]) -> dict[str, float]:
    p50, p99 = percentiles(latencies_ms, (50, 99)) if latencies_ms else (0.0, 0.0)
    return {"latency_p50_ms": p50, "latency_p99_ms": p99}


def bench_policy(sessions: int, frames: int, max_batch: int) -> dict[str, float]:
    """Pure policy: every session submits, batches are scheduled and completed at once (fake clock)."""
    pol = BatchPolicy(SchedulerConfig(max_batch=max_batch, budget_ms=1e9))
    item = FrameItem(image=_IMAGE, source=None)
    now = 0.0
    done = 0
    batches = 0
    t0 = time.perf_counter()
    fid = 0
    while done < frames:
        for s in range(sessions):
            pol.submit(f"s{s}", fid, item, arrival_s=now, deadline_s=1e9, now=now)
        fid += 1
        while (plan := pol.schedule(now).plan) is not None:
            now += 1e-4
            done += len(pol.complete(plan, _noop(plan.frames), now))
            batches += 1
        now += 1e-3
    elapsed = time.perf_counter() - t0
    return {
        "sessions": sessions,
        "frames": done,
        "batches": batches,
        "us_per_frame": elapsed / done * 1e6,
        "mean_batch": done / batches,
    }


async def _bench_runner_async(sessions: int, frames: int, max_batch: int, workers: int) -> dict[str, float]:
    config = SchedulerConfig(max_batch=max_batch, max_queue_delay_ms=4.0, workers=workers, budget_ms=1e9)
    sched = FrameScheduler(_noop, config)
    await sched.start()
    per_session = max(1, frames // sessions)
    latencies: list[float] = []
    outcomes: dict[str, int] = {}

    async def session(sid: str) -> None:
        item = FrameItem(image=_IMAGE, source=None)
        for fid in range(per_session):
            t = time.monotonic()
            res = await sched.submit(sid, fid, item, arrival_s=t, deadline_s=t + 1e6)
            latencies.append((time.monotonic() - t) * 1e3)
            outcomes[str(res.outcome)] = outcomes.get(str(res.outcome), 0) + 1

    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(session(f"s{i}") for i in range(sessions)))
    finally:
        elapsed = time.perf_counter() - t0
        stats = sched.stats()
        await sched.close()
    total = per_session * sessions
    return {
        "sessions": sessions,
        "frames": total,
        "frames_per_s": total / elapsed,
        "us_per_frame": elapsed / total * 1e6,
        "mean_batch": stats["mean_batch_size"],
        **_latency(latencies),
        "processed": float(outcomes.get(str(Outcome.PROCESSED), 0)),
    }


async def _bench_bare_executor(frames: int) -> dict[str, float]:
    """The floor: one run_in_executor hop per frame, no scheduler."""
    loop = asyncio.get_running_loop()
    item = FrameItem(image=_IMAGE, source=None)
    latencies: list[float] = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        t0 = time.perf_counter()
        for _ in range(frames):
            t = time.monotonic()
            await loop.run_in_executor(pool, _noop, [item])
            latencies.append((time.monotonic() - t) * 1e3)
        elapsed = time.perf_counter() - t0
    return {"frames": frames, "us_per_frame": elapsed / frames * 1e6, **_latency(latencies)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frames", type=int, default=2000, help="frames per case (all sessions together)")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--output", type=Path, help="write the JSON report here (default: none, printed only)"
    )
    args = parser.parse_args(argv)

    report: dict[str, object] = {"frames": args.frames, "max_batch": args.max_batch, "workers": args.workers}
    report["bare_executor"] = asyncio.run(_bench_bare_executor(args.frames))
    report["policy"] = [bench_policy(s, args.frames, args.max_batch) for s in args.sessions]
    report["runner"] = [
        asyncio.run(_bench_runner_async(s, args.frames, args.max_batch, args.workers)) for s in args.sessions
    ]

    bare = report["bare_executor"]
    assert isinstance(bare, dict)
    print(f"bare run_in_executor: {bare['us_per_frame']:.1f} us/frame, p50 {bare['latency_p50_ms']:.3f} ms")
    print(
        f"{'sessions':>8} {'policy us/frame':>16} {'runner us/frame':>16} {'mean batch':>11} "
        f"{'p50 ms':>8} {'p99 ms':>8}"
    )
    for pol, run in zip(report["policy"], report["runner"], strict=True):  # type: ignore[call-overload]
        print(
            f"{run['sessions']:>8} {pol['us_per_frame']:>16.1f} {run['us_per_frame']:>16.1f} "
            f"{run['mean_batch']:>11.2f} {run['latency_p50_ms']:>8.3f} {run['latency_p99_ms']:>8.3f}"
        )
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2))
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
