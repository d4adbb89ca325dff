"""Monitor events: a bounded in-memory ring for the dashboard plus an append-only JSONL file rotated by size.

Events are rare (session open/close, drop bursts, deadline misses, engine errors, memory pressure, degradation
steps), so the file is written synchronously under a lock; the ring keeps memory bounded however long the
gateway
runs, and rotation (`events.jsonl` -> `events.jsonl.1` -> ... up to `backups`) keeps the disk bounded.
A write failure (disk full, permissions) is counted and never raised: observability must not take the
gateway down.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# Event kinds the monitor itself emits; the gateway may use any other string too.
SESSION_OPEN = "session_open"
SESSION_CLOSE = "session_close"
DROPS = "drops"
DEADLINE_MISS = "deadline_miss"
ENGINE_ERROR = "engine_error"
OUT_OF_MEMORY = "out_of_memory"
DEGRADATION = "degradation"
REJECT = "reject"


@dataclass(frozen=True)
class Event:
    t: float  # wall clock (epoch seconds), for humans and log correlation
    mono: float  # the monitor's clock, for ordering and windows
    seq: int
    kind: str
    message: str
    data: dict[str, object] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "t": round(self.t, 3),
            "seq": self.seq,
            "kind": self.kind,
            "message": self.message,
            "data": self.data,
        }


class JsonlRotatingWriter:
    """Appends one JSON object per line; rotates when the next line would push the file past `max_bytes`."""

    def __init__(self, path: Path, max_bytes: int = 5_000_000, backups: int = 3) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.path = path
        self.max_bytes = max_bytes
        self.backups = max(1, backups)
        self.errors = 0
        self.rotations = 0
        self._lock = threading.Lock()
        self._closed = False

    def write(self, obj: dict[str, object]) -> bool:
        line = (json.dumps(obj, default=str, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self._closed:
                return False
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    size = self.path.stat().st_size
                except FileNotFoundError:
                    size = 0
                if size > 0 and size + len(line) > self.max_bytes:
                    self._rotate()
                with open(self.path, "ab") as f:
                    f.write(line)
                return True
            except OSError:
                self.errors += 1
                return False

    def _rotate(self) -> None:
        for i in range(self.backups - 1, 0, -1):
            src = self.path.with_name(f"{self.path.name}.{i}")
            if src.exists():
                os.replace(src, self.path.with_name(f"{self.path.name}.{i + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self.rotations += 1

    def close(self) -> None:
        with self._lock:
            self._closed = True


log = logging.getLogger("gateway.events")
_WARN_KINDS = frozenset({DROPS, DEADLINE_MISS, ENGINE_ERROR, OUT_OF_MEMORY, DEGRADATION})


class EventLog:
    """Thread-safe ring of the last `capacity` events, mirrored to an optional JSONL writer."""

    def __init__(
        self,
        capacity: int = 500,
        writer: JsonlRotatingWriter | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._ring: deque[Event] = deque(maxlen=capacity)
        self._writer = writer
        self._lock = threading.Lock()
        self._seq = 0
        self._wall = wall_clock
        self.counts: dict[str, int] = {}
        self._listeners: list[Callable[[Event], None]] = []

    def subscribe(self, listener: Callable[[Event], None]) -> None:
        """`listener(event)` after every emit, on the emitting thread: it must not block (webhooks queue)."""
        self._listeners.append(listener)

    def emit(self, now: float, kind: str, message: str, data: dict[str, object] | None = None) -> Event:
        with self._lock:
            self._seq += 1
            ev = Event(
                t=float(self._wall()),
                mono=now,
                seq=self._seq,
                kind=kind,
                message=message,
                data=dict(data or {}),
            )
            self._ring.append(ev)
            self.counts[kind] = self.counts.get(kind, 0) + 1
        if self._writer is not None:
            self._writer.write(ev.as_dict())
        for listener in self._listeners:
            try:
                listener(ev)
            except Exception:  # noqa: BLE001  (observability must not take the gateway down)
                log.exception("event listener failed")
        # Operators tailing the log see the same story as the dashboard's event list.
        log.log(logging.WARNING if kind in _WARN_KINDS else logging.INFO, "%s: %s", kind, message)
        return ev

    def recent(self, limit: int | None = None) -> list[Event]:
        with self._lock:
            evs = list(self._ring)
        return evs if limit is None else evs[-limit:]

    def counts_by_kind(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    @property
    def write_errors(self) -> int:
        return 0 if self._writer is None else self._writer.errors

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


class RateLimiter:
    """At most one pass per key per `interval_s` (pure: time passed in) — keeps noisy events from flooding."""

    def __init__(self, interval_s: float, max_keys: int = 1024) -> None:
        self.interval_s = interval_s
        self._last: dict[str, float] = {}
        self._max_keys = max_keys
        self.suppressed: dict[str, int] = {}

    def allow(self, key: str, now: float) -> bool:
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self.suppressed[key] = self.suppressed.get(key, 0) + 1
            return False
        if len(self._last) >= self._max_keys and key not in self._last:
            oldest = min(self._last, key=self._last.__getitem__)
            del self._last[oldest]
            self.suppressed.pop(oldest, None)
        self._last[key] = now
        return True

    def take_suppressed(self, key: str) -> int:
        return self.suppressed.pop(key, 0)
