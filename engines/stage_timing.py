"""The per-call timing book of `Pipeline.process`: each stage's wall time and batch size, and which items took
part, so every `FrameOutput` carries the batches it was in (`timings_ms`, `batch_sizes`).

Why a book, not a timer per item: a stage runs once per call over items from many sessions, and an item's
stage time is the time of the batches it shared. The book logs one debug line per batch on the logger it is
given (the pipeline's), so the lines keep the pipeline's name wherever the stage runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class StageBook:
    """Per-call timing book: stage -> (ms, batch size), and which items took part in each stage."""

    log: logging.Logger
    ms: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    members: dict[str, set[int]] = field(default_factory=dict)

    @contextmanager
    def time(self, stage: str, members: Sequence[int], size: int) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            ms = (time.perf_counter() - t0) * 1000.0
            self.ms[stage] = self.ms.get(stage, 0.0) + ms
            self.sizes[stage] = self.sizes.get(stage, 0) + size
            self.members.setdefault(stage, set()).update(members)
            self.log.debug("%s took %.1f ms (batch %d)", stage, ms, size)

    def for_item(self, i: int) -> tuple[dict[str, float], dict[str, int]]:
        stages = [s for s, m in self.members.items() if i in m]
        return {s: self.ms[s] for s in stages}, {s: self.sizes[s] for s in stages}
