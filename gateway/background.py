"""A worker pool for work done for a request rather than for live video (source uploads: decode, face
detection, trimming), run at a lower CPU priority.

Why: on a small machine every core an upload takes is taken from the live sessions' frames; an attacker
sending valid photos could otherwise slow every stream down. Linux schedules threads individually, so each
worker lowers its own priority (`nice`) when it starts; a live frame then wins the CPU whenever both wait.
`admit()` bounds how many requests may wait for the pool (the rest get 503), so queued bodies cannot pile up.
Image decoding goes further, to a child process (`processes`, gateway.image_decode): OpenCV's own threads and
the GIL would otherwise carry its cost back to the live frames.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass

from gateway.errors import Unavailable
from gateway.image_decode import decode_pool

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackgroundConfig:
    workers: int = 1
    nice: int = 10  # added to the workers' priority; 0 = as the rest of the gateway
    max_waiting: int = 4  # requests allowed to wait for (or run on) the pool at once

    def __post_init__(self) -> None:
        if self.workers < 1 or self.max_waiting < 1 or not 0 <= self.nice <= 19:
            raise ValueError("workers >= 1, max_waiting >= 1 and nice in 0..19 are required")


def _lower_priority(nice: int) -> None:
    if nice and hasattr(os, "setpriority"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        except OSError as exc:  # not allowed here: run at normal priority, say so once per worker
            logger.info("background worker keeps its priority: %s", exc)


class BackgroundPool:
    def __init__(self, config: BackgroundConfig) -> None:
        self.config = config
        self.executor = ThreadPoolExecutor(
            max_workers=config.workers,
            thread_name_prefix="background",
            initializer=_lower_priority,
            initargs=(config.nice,),
        )
        self._processes: ProcessPoolExecutor | None = None  # made on first use: its queues and locks too
        self._busy = 0

    @contextlib.contextmanager
    def admit(self) -> Iterator[None]:
        """Hold one of `max_waiting` places while the request's work is queued or running."""
        if self._busy >= self.config.max_waiting:
            raise Unavailable("too many uploads in progress", retry_after_s=2)
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1

    @property
    def processes(self) -> ProcessPoolExecutor:
        """The image decoder's child processes (gateway.image_decode)."""
        if self._processes is None:
            self._processes = decode_pool(self.config.nice, self.config.workers)
        return self._processes

    def restart_processes(self) -> None:
        """A fresh decoder pool after the old one broke (its child was killed)."""
        if self._processes is not None:
            self._processes.shutdown(wait=False, cancel_futures=True)
        self._processes = None

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        if self._processes is not None:
            self._processes.shutdown(wait=False, cancel_futures=True)
