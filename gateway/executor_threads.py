"""Every worker thread of an executor started up front, not at the first busy moment of a show.

Why: a ThreadPoolExecutor adds a thread only when work arrives while none of its threads is idle, so its
last threads may start an hour into a stream, in a burst; glibc gives each new thread its own heap arena,
which then grows with the frames that thread touches. A 60-minute soak read that as the gateway's memory
rising 5 MB at minute 45, together with one more thread. Started with the media path, every thread takes
its turn at work from the start (idle workers wait in line), so its arena reaches its size during warm-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from concurrent.futures import Executor


def default_workers() -> int:
    """The number of threads asyncio's default executor grows to (ThreadPoolExecutor's default size)."""
    count = getattr(os, "process_cpu_count", os.cpu_count)()
    return min(32, (count or 1) + 4)


async def start_all_threads(executor: Executor | None, workers: int, timeout_s: float = 5.0) -> None:
    """Make `executor` (None: the running loop's default) start `workers` threads now: as many tasks, each
    waiting at a barrier until all have started. A pool smaller than `workers` cannot fill the barrier; it
    breaks after `timeout_s` and the tasks return all the same."""
    if workers < 1:
        return
    barrier = threading.Barrier(workers, timeout=timeout_s)

    def wait() -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()

    loop = asyncio.get_running_loop()
    await asyncio.gather(*(loop.run_in_executor(executor, wait) for _ in range(workers)))
