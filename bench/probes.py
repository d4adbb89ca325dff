"""What the fuzz rig and the benchmarks watch while they load the gateway: one real publisher's windows
(`LiveProbe`, quiet against attacked time), a process's RSS, fds and threads over time (`ProcessSampler`),
its CPU seconds and the time its threads waited for a CPU (read from /proc: a pid of another process is
enough, no handle on it needed).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.percentiles import percentiles
from loadgen.stats import Event, StatsCollector


def runqueue_wait_s(pid: int) -> float:
    """Seconds the threads of `pid` alive now have spent runnable but waiting for a CPU
    (/proc/pid/task/*/schedstat, second field): how much the rest of the machine delays this process."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that just ended
    return total / 1e9


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of every thread of `pid` so far (/proc/pid/stat)."""
    fields_ = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields_[11]) + int(fields_[12])) / os.sysconf("SC_CLK_TCK")


# --- the live session ---
@dataclass
class LiveWindow:
    sent: int
    received: int
    fps: float
    p50_ms: float | None
    p95_ms: float | None
    loss: float  # frames sent that did not come back with a readable stamp
    unreadable: int = 0  # came back in the window, stamp unreadable (picture damaged where the stamp is)
    missing: int = 0  # never came back at all (dropped by the gateway or lost on the way)

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


class LiveProbe:
    """Collects a WhipJob's events (pass `emit` to it) in a loadgen StatsCollector and summarises any window
    of send times."""

    def __init__(self) -> None:
        self.stats = StatsCollector(budget_ms=float("inf"))  # no budget here: latencies are reported as-is

    def emit(self, event: Event) -> None:
        self.stats.record(event)

    @property
    def frames_received(self) -> int:
        return self.stats.window(float("-inf"), float("inf")).received

    def window(self, t0: float, t1: float) -> LiveWindow:
        return self.pooled([(t0, t1)])

    def pooled(self, spans: Sequence[tuple[float, float]]) -> LiveWindow:
        """The frames sent in any of `spans`, summarised as one window (e.g. the quiet before and after an
        attack, so that a drift over the run, such as the publisher's rate still climbing, cancels out)."""
        parts = [self.stats.window(t0, t1) for t0, t1 in spans]
        latencies = [(s.recv_t - s.sent_t) * 1000.0 for t0, t1 in spans for s in self.stats.samples(t0, t1)]
        sent, received = sum(w.sent for w in parts), sum(w.received for w in parts)
        unreadable = sum(w.unreadable for w in parts)
        span = max(sum(t1 - t0 for t0, t1 in spans), 1e-6)
        p50, p95 = percentiles(latencies, (50, 95)) if latencies else (None, None)
        return LiveWindow(
            sent=sent,
            received=received,
            fps=received / span,
            p50_ms=p50,
            p95_ms=p95,
            loss=1.0 - received / sent if sent else 0.0,
            unreadable=unreadable,
            missing=max(0, sent - received - unreadable),
        )


# --- the gateway process ---
@dataclass
class ProcSample:
    t: float
    rss_bytes: int
    fds: int
    threads: int


def sample_process(pid: int) -> ProcSample | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    except OSError:
        return None
    fields_ = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss = int(fields_.get("VmRSS", "0 kB").split()[0]) * 1024
    threads = int(fields_.get("Threads", "0").strip())
    return ProcSample(time.monotonic(), rss, fds, threads)


class ProcessSampler:
    """Samples a pid every `period_s` until stopped; `trend()` summarises start, end, max and slope."""

    def __init__(self, pid: int, period_s: float = 1.0) -> None:
        self.pid = pid
        self.period_s = period_s
        self.samples: list[ProcSample] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            sample = sample_process(self.pid)
            if sample is not None:
                self.samples.append(sample)
            await asyncio.sleep(self.period_s)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def trend(self) -> dict[str, Any]:
        if not self.samples:
            return {"samples": 0}
        t = np.array([s.t for s in self.samples]) - self.samples[0].t
        out: dict[str, Any] = {"samples": len(self.samples), "span_s": round(float(t[-1]), 1)}
        for name in ("rss_bytes", "fds", "threads"):
            v = np.array([getattr(s, name) for s in self.samples], dtype=float)
            slope = float(np.polyfit(t, v, 1)[0]) * 60.0 if len(v) >= 3 and t[-1] > 0 else 0.0
            out[name] = {
                "start": int(v[0]),
                "end": int(v[-1]),
                "max": int(v.max()),
                "per_min": round(slope, 1),
            }
        every = max(1, len(self.samples) // 30)  # about 30 points: enough to see a plateau or a climb
        out["series"] = [
            {
                "t_s": round(float(t[i]), 1),
                "rss_mb": round(x.rss_bytes / 2**20, 1),
                "fds": x.fds,
                "threads": x.threads,
            }
            for i, x in enumerate(self.samples)
            if i % every == 0 or i == len(self.samples) - 1
        ]
        return out
