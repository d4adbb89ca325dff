"""Executor threads started up front (gateway.executor_threads): all of them, at once, and a pool smaller
than asked for does not hang the start."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from gateway.executor_threads import default_workers, start_all_threads


def _named(prefix: str) -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith(prefix))


def test_every_worker_thread_exists_after_the_start() -> None:
    with ThreadPoolExecutor(max_workers=5, thread_name_prefix="prestart-five") as pool:
        asyncio.run(start_all_threads(pool, 5))
        assert _named("prestart-five") == 5
        pool.submit(time.sleep, 0.01).result()  # and it still works
        assert _named("prestart-five") == 5


def test_a_smaller_pool_breaks_the_barrier_instead_of_hanging() -> None:
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="prestart-two") as pool:
        t0 = time.monotonic()
        asyncio.run(start_all_threads(pool, 4, timeout_s=0.2))
        assert time.monotonic() - t0 < 5.0
        assert _named("prestart-two") == 2


def test_the_loops_default_executor_is_filled() -> None:
    async def main() -> int:
        await start_all_threads(None, default_workers())
        return _named("asyncio")

    assert asyncio.run(main()) >= default_workers()
