"""Watch remote inference engines (Triton) and make their state visible: /readyz, events, recovery.

Why: with an in-process engine, "models loaded" never changes after start-up. With a shared Triton tier the
models can go away mid-run (server restart, eviction, rollout). The media path already survives it (a failed
batch becomes late-policy frames and `engine_error` events); what is missing is the fleet's view: /readyz must
turn 503 so a load balancer stops sending new publishers here, and the transition must be one event each way
(`engine_unavailable`, `engine_recovered`) rather than a stream of per-frame errors. The gRPC channel
reconnects by itself; this only observes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)

ENGINE_UNAVAILABLE = "engine_unavailable"
ENGINE_RECOVERED = "engine_recovered"


class EngineWatch:
    """Polls `not_ready()` (blocking, run in a thread) every `interval_s`; `down` is the latest answer."""

    def __init__(
        self, not_ready: Callable[[], list[str]], emit: Callable[..., None], interval_s: float = 1.0
    ) -> None:
        self._not_ready = not_ready
        self._emit = emit
        self._interval = interval_s
        self.down: tuple[str, ...] = ()
        self._task: asyncio.Task[None] | None = None

    def observe(self, down: list[str]) -> None:
        """Record one poll's answer; emit one event per transition (pure bookkeeping, tested directly)."""
        now = tuple(sorted(down))
        if now == self.down:
            return
        lost = sorted(set(now) - set(self.down))
        back = sorted(set(self.down) - set(now))
        self.down = now
        if lost:
            self._emit(ENGINE_UNAVAILABLE, f"inference engine(s) not ready: {', '.join(lost)}", engines=lost)
        if back:
            self._emit(ENGINE_RECOVERED, f"inference engine(s) ready again: {', '.join(back)}", engines=back)

    async def poll_once(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            down = await loop.run_in_executor(None, self._not_ready)
        except Exception as exc:  # noqa: BLE001 - a failing check counts as "all down", never kills the task
            logger.warning("engine readiness check failed: %r", exc)
            down = ["*"]
        self.observe(down)

    async def _run(self) -> None:
        while True:
            await self.poll_once()
            await asyncio.sleep(self._interval)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="engine-watch")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
