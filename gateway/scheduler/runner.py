"""The async side of the scheduler: futures, a timer, and worker threads. Every decision lives in `policy`.

Every event (submit, completion, session removal, timer) schedules one `_pump` with `call_soon`, so a burst
of submits in one loop iteration is decided once. `_pump` asks the policy what to do, resolves the futures it
names, starts at most one batch per free worker on a thread pool (inference never runs on the event loop),
and arms one timer for the policy's `wake_at`. Batch times are measured in the worker thread, so event-loop
lag does not inflate the estimates. Use from one event loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from engines.frames import FrameItem, FrameOutput
from gateway.monitoring.records import Outcome
from gateway.scheduler.estimator import BatchTimeEstimator
from gateway.scheduler.policy import BatchPolicy, Plan, Resolution, ScheduledFrame, SchedulerConfig

log = logging.getLogger(__name__)

ProcessFn = Callable[[list[FrameItem]], list[FrameOutput]]


class FrameScheduler:
    """Cross-session dynamic batcher: one future per submitted frame, resolved with its `ScheduledFrame`."""

    def __init__(
        self,
        process: ProcessFn,
        config: SchedulerConfig,
        clock: Callable[[], float] = time.monotonic,
        estimator: BatchTimeEstimator | None = None,
    ) -> None:
        self._process = process
        self._config = config
        self._clock = clock
        self._policy = BatchPolicy(config, estimator)
        self._futures: dict[int, asyncio.Future[ScheduledFrame]] = {}
        self._running: set[asyncio.Future[tuple[list[FrameOutput] | BaseException, float]]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._pump_scheduled = False
        self._closed = False

    async def start(self) -> None:
        """Bind to the running loop and start the worker threads. Calling it twice is harmless."""
        if self._closed:
            raise RuntimeError("scheduler is closed")
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(
            max_workers=self._config.workers, thread_name_prefix="livefuse-batch"
        )

    async def close(self) -> None:
        """Pending frames resolve DROPPED_STALE, batches in flight finish, workers are joined. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._resolve(self._policy.drain(self._clock()))
        if self._running:
            # Their completion callbacks resolve their frames normally (they were processed).
            await asyncio.gather(*self._running, return_exceptions=True)
            await asyncio.sleep(0)  # let the done-callbacks scheduled by the gather run
        for fut in self._futures.values():  # nothing should be left; never leave a caller waiting forever
            if not fut.done():
                fut.set_result(ScheduledFrame(Outcome.DROPPED_STALE, None, 0.0, 0, 0.0))
        self._futures.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=True)  # threads are idle now: joining is immediate
            self._executor = None

    def submit(
        self, session_id: str, frame_id: int, item: FrameItem, arrival_s: float, deadline_s: float
    ) -> asyncio.Future[ScheduledFrame]:
        """Offer a session's newest frame; any older pending frame of the session resolves DROPPED_STALE."""
        loop = self._require_loop()
        fut: asyncio.Future[ScheduledFrame] = loop.create_future()
        now = self._clock()
        if self._closed:
            fut.set_result(ScheduledFrame(Outcome.DROPPED_STALE, None, 0.0, 0, 0.0))
            return fut
        ticket, resolved = self._policy.submit(session_id, frame_id, item, arrival_s, deadline_s, now)
        self._futures[ticket] = fut
        self._resolve(resolved)
        self._request_pump()
        return fut

    def remove_session(self, session_id: str) -> None:
        """The session ended: its pending frame resolves DROPPED_STALE and it no longer holds batches back."""
        self._resolve(self._policy.remove_session(session_id, self._clock()))
        if not self._closed and self._loop is not None:
            self._request_pump()

    def set_max_batch(self, n: int) -> None:
        """Cap the batch size (the degradation controller's knob); clamped to [1, config.max_batch]."""
        self._policy.set_max_batch(n)
        if not self._closed and self._loop is not None:
            self._request_pump()

    def stats(self) -> dict[str, float]:
        out = self._policy.stats()
        out["workers"] = float(self._config.workers)
        return out

    # --- internals ----------------------------------------------------------------------------------------

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("FrameScheduler.start() was not awaited")
        return self._loop

    def _request_pump(self) -> None:
        if not self._pump_scheduled:
            self._pump_scheduled = True
            self._require_loop().call_soon(self._pump)

    def _on_timer(self) -> None:
        self._timer = None
        self._pump()

    def _pump(self) -> None:
        self._pump_scheduled = False
        if self._closed:
            return
        loop = self._require_loop()
        while True:
            decision = self._policy.schedule(self._clock())
            self._resolve(decision.resolved)
            if decision.plan is None:
                break
            self._dispatch(loop, decision.plan)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if decision.wake_at is not None:
            delay = max(0.0, decision.wake_at - self._clock())
            self._timer = loop.call_later(delay, self._on_timer)

    def _dispatch(self, loop: asyncio.AbstractEventLoop, plan: Plan) -> None:
        assert self._executor is not None
        fut = loop.run_in_executor(self._executor, self._run_batch, plan)
        self._running.add(fut)
        fut.add_done_callback(lambda f: self._on_done(f, plan))

    def _run_batch(self, plan: Plan) -> tuple[list[FrameOutput] | BaseException, float]:
        """Worker thread: run the batch, never raise (the error becomes every item's outcome)."""
        try:
            result: list[FrameOutput] | BaseException = self._process(plan.frames)
        except Exception as exc:  # noqa: BLE001 - any failure of the process function fails its batch
            result = exc
        return result, self._clock()

    def _on_done(
        self, fut: asyncio.Future[tuple[list[FrameOutput] | BaseException, float]], plan: Plan
    ) -> None:
        self._running.discard(fut)
        if fut.cancelled():
            result: list[FrameOutput] | BaseException = asyncio.CancelledError()
            finished = self._clock()
        elif (exc := fut.exception()) is not None:
            result, finished = exc, self._clock()
        else:
            result, finished = fut.result()
        if isinstance(result, BaseException):
            log.warning("batch of %d failed: %r", len(plan.items), result)
        self._resolve(self._policy.complete(plan, result, finished))
        if not self._closed:
            self._request_pump()

    def _resolve(self, resolutions: list[Resolution] | tuple[Resolution, ...]) -> None:
        for ticket, frame in resolutions:
            fut = self._futures.pop(ticket, None)
            if fut is not None and not fut.done():  # the caller may have cancelled its future
                fut.set_result(frame)
