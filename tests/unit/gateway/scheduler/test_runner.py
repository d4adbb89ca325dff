"""The async runner with fake process functions: batches form across sessions, order holds, close is clean."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from engines.frames import FrameItem, FrameOutput
from gateway.monitoring.records import Outcome
from gateway.scheduler import FrameScheduler, ScheduledFrame, SchedulerConfig

FAR = 1e9


class Recorder:
    """A process function that records every batch as (session, frame) pairs and the thread it ran on."""

    def __init__(self, delay_s: Callable[[list[tuple[str, int]]], float] = lambda _: 0.002) -> None:
        self.delay_s = delay_s
        self.batches: list[list[tuple[str, int]]] = []
        self.threads: set[int] = set()
        self.overlap: list[str] = []
        self._active: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, items: list[FrameItem]) -> list[FrameOutput]:
        keys = [_key(it) for it in items]
        with self._lock:
            self.batches.append(keys)
            self.threads.add(threading.get_ident())
            for sid, _ in keys:
                if sid in self._active:
                    self.overlap.append(sid)
                self._active.add(sid)
        time.sleep(self.delay_s(keys))
        with self._lock:
            for sid, _ in keys:
                self._active.discard(sid)
        return [FrameOutput(image=it.image, faces=1) for it in items]


def _item(session: str, frame_id: int) -> FrameItem:
    item = FrameItem(image=np.zeros((2, 2, 3), dtype=np.uint8), source=None)
    _KEYS[id(item)] = (session, frame_id)
    return item


_KEYS: dict[int, tuple[str, int]] = {}


def _key(item: FrameItem) -> tuple[str, int]:
    return _KEYS[id(item)]


def _submit(s: FrameScheduler, sid: str, fid: int, deadline: float = FAR) -> asyncio.Future[ScheduledFrame]:
    now = time.monotonic()
    return s.submit(sid, fid, _item(sid, fid), arrival_s=now, deadline_s=deadline)


def _log_processed(log: list[int], frame_id: int, fut: asyncio.Future[ScheduledFrame]) -> None:
    if fut.result().outcome is Outcome.PROCESSED:
        log.append(frame_id)


def _batch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("livefuse-batch")]


async def test_concurrent_sessions_are_batched_off_the_loop() -> None:
    rec = Recorder()
    config = SchedulerConfig(max_batch=8, max_queue_delay_ms=4.0, workers=1, budget_ms=1e9)
    sched = FrameScheduler(rec, config)
    await sched.start()
    results: dict[str, list[ScheduledFrame]] = {}

    async def session(sid: str) -> None:
        out = results.setdefault(sid, [])
        for fid in range(8):
            out.append(await asyncio.wait_for(_submit(sched, sid, fid), 5.0))

    try:
        await asyncio.gather(*(session(f"s{i}") for i in range(4)))
    finally:
        await sched.close()
    assert _batch_threads() == []
    frames = [f for res in results.values() for f in res]
    assert len(frames) == 32
    assert {f.outcome for f in frames} == {Outcome.PROCESSED}
    assert all(f.output is not None and f.output.faces == 1 for f in frames)
    assert max(len(b) for b in rec.batches) > 1
    assert sum(len(b) for b in rec.batches) == 32
    assert threading.get_ident() not in rec.threads
    stats = sched.stats()
    assert stats["processed"] == 32.0 and stats["batches_run"] == len(rec.batches)
    assert stats["mean_batch_size"] > 1.0
    assert stats["est_batch_ms"] > 0.0
    assert max(f.batch_size for f in frames) > 1 and all(f.process_ms > 0 for f in frames)


async def test_frames_of_a_session_leave_in_order_with_parallel_workers() -> None:
    # Uneven batch times (a session's frames alternate slow/fast) so out-of-order completion would show.
    rec = Recorder(delay_s=lambda keys: 0.012 if keys[0][1] % 2 == 0 else 0.001)
    # frames 3 ms apart: the frame-interval deadline would drop most of them; this test is about order
    config = SchedulerConfig(
        max_batch=2, max_queue_delay_ms=1.0, workers=3, budget_ms=1e9, interval_deadline_batches=0.0
    )
    sched = FrameScheduler(rec, config)
    await sched.start()
    done: dict[str, list[int]] = {"a": [], "b": [], "c": []}
    futures: list[asyncio.Future[ScheduledFrame]] = []
    try:
        for fid in range(12):
            for sid in done:
                fut = _submit(sched, sid, fid)
                fut.add_done_callback(functools.partial(_log_processed, done[sid], fid))
                futures.append(fut)
            await asyncio.sleep(0.003)
        await asyncio.wait_for(asyncio.gather(*futures), 5.0)
    finally:
        await sched.close()
    assert rec.overlap == []  # no session ever had two frames in flight
    for sid, fids in done.items():
        assert fids == sorted(fids), sid
        assert len(fids) >= 3  # work did get done for every session
    outcomes = {f.result().outcome for f in futures}
    assert outcomes <= {Outcome.PROCESSED, Outcome.DROPPED_STALE}
    assert Outcome.DROPPED_STALE in outcomes  # frames arrive faster than slow batches: newest wins
    assert len(rec.threads) > 1  # batches really ran on several workers


async def test_close_resolves_pending_joins_workers_and_is_idempotent() -> None:
    release = threading.Event()

    def blocking(items: list[FrameItem]) -> list[FrameOutput]:
        release.wait(5.0)
        return [FrameOutput(image=it.image, faces=0) for it in items]

    sched = FrameScheduler(blocking, SchedulerConfig(max_batch=4, workers=1, budget_ms=1e9))
    await sched.start()
    in_flight = _submit(sched, "a", 1)
    await asyncio.sleep(0.01)  # a is dispatched and blocks the only worker
    pending = _submit(sched, "b", 1)
    await asyncio.sleep(0.01)
    assert not pending.done()
    closing = asyncio.create_task(sched.close())
    stale = await asyncio.wait_for(pending, 2.0)
    assert stale.outcome is Outcome.DROPPED_STALE and stale.output is None
    assert not closing.done()  # waits for the batch in flight
    release.set()
    await asyncio.wait_for(closing, 5.0)
    assert in_flight.done() and in_flight.result().outcome is Outcome.PROCESSED
    assert _batch_threads() == []
    await sched.close()  # idempotent
    late = _submit(sched, "c", 1)
    assert late.done() and late.result().outcome is Outcome.DROPPED_STALE


async def test_error_fans_out_to_every_item() -> None:
    calls: list[int] = []

    def failing(items: list[FrameItem]) -> list[FrameOutput]:
        calls.append(len(items))
        raise RuntimeError("engine exploded")

    sched = FrameScheduler(failing, SchedulerConfig(max_batch=4, max_queue_delay_ms=20.0, budget_ms=1e9))
    await sched.start()
    try:
        futs = [_submit(sched, sid, 1) for sid in ("a", "b", "c")]
        res = await asyncio.wait_for(asyncio.gather(*futs), 5.0)
        assert calls == [3]  # submitted in one loop iteration: decided together, one batch
        assert all(r.outcome is Outcome.ERROR and r.error and "engine exploded" in r.error for r in res)
        assert sched.stats()["errors"] == 3.0
        # The scheduler keeps working after a failed batch.
        again = await asyncio.wait_for(_submit(sched, "a", 2), 5.0)
        assert again.outcome is Outcome.ERROR and calls[-1] == 1
    finally:
        await sched.close()


async def test_output_count_mismatch_fails_every_item() -> None:
    def short(items: list[FrameItem]) -> list[FrameOutput]:
        return [FrameOutput(image=items[0].image, faces=0)]

    sched = FrameScheduler(short, SchedulerConfig(max_batch=4, budget_ms=1e9))
    await sched.start()
    try:
        res = await asyncio.wait_for(asyncio.gather(_submit(sched, "a", 1), _submit(sched, "b", 1)), 5.0)
    finally:
        await sched.close()
    assert [r.outcome for r in res] == [Outcome.ERROR, Outcome.ERROR]
    assert all(r.batch_size == 2 and r.error and "1 outputs for 2 items" in r.error for r in res)


async def test_stale_replacement_remove_session_and_deadline() -> None:
    release = threading.Event()
    seen: list[int] = []

    def blocking(items: list[FrameItem]) -> list[FrameOutput]:
        seen.append(len(items))
        release.wait(5.0)
        return [FrameOutput(image=it.image, faces=0) for it in items]

    sched = FrameScheduler(blocking, SchedulerConfig(max_batch=4, workers=1, budget_ms=1e9))
    await sched.start()
    try:
        first = _submit(sched, "a", 1)
        await asyncio.sleep(0.01)  # a/1 occupies the worker
        b1 = _submit(sched, "b", 1)
        b2 = _submit(sched, "b", 2)
        assert (await asyncio.wait_for(b1, 1.0)).outcome is Outcome.DROPPED_STALE
        c1 = _submit(sched, "c", 1)
        sched.remove_session("c")
        assert (await asyncio.wait_for(c1, 1.0)).outcome is Outcome.DROPPED_STALE
        past = _submit(sched, "d", 1, deadline=time.monotonic() - 0.001)
        assert (await asyncio.wait_for(past, 1.0)).outcome is Outcome.DROPPED_DEADLINE
        release.set()
        assert (await asyncio.wait_for(first, 5.0)).outcome is Outcome.PROCESSED
        assert (await asyncio.wait_for(b2, 5.0)).outcome is Outcome.PROCESSED
        assert seen == [1, 1]  # the late and removed frames never reached the process function
        stats = sched.stats()
        assert stats["dropped_stale"] == 2.0 and stats["dropped_deadline"] == 1.0
    finally:
        release.set()
        await sched.close()


async def test_cancelled_caller_future_and_set_max_batch() -> None:
    rec = Recorder(delay_s=lambda _: 0.0)
    sched = FrameScheduler(rec, SchedulerConfig(max_batch=8, max_queue_delay_ms=50.0, budget_ms=1e9))
    await sched.start()
    try:
        sched.set_max_batch(2)
        futs = [_submit(sched, sid, 1) for sid in ("a", "b", "c", "d")]
        futs[0].cancel()  # the session went away without telling us: must not break the batch
        res = await asyncio.wait_for(asyncio.gather(*futs[1:]), 5.0)
        assert {r.outcome for r in res} == {Outcome.PROCESSED}
        assert [len(b) for b in rec.batches] == [2, 2]
        assert sched.stats()["max_batch"] == 2.0
    finally:
        await sched.close()


async def test_measured_batch_time_drives_deadline_rejection() -> None:
    calls: list[int] = []

    def slow(items: list[FrameItem]) -> list[FrameOutput]:
        calls.append(len(items))
        time.sleep(0.030)
        return [FrameOutput(image=it.image, faces=0) for it in items]

    sched = FrameScheduler(slow, SchedulerConfig(max_batch=4, budget_ms=1e9))
    await sched.start()
    try:
        warm = await asyncio.wait_for(_submit(sched, "a", 1), 5.0)
        assert warm.outcome is Outcome.PROCESSED and warm.process_ms >= 30.0
        assert sched.stats()["est_single_ms"] >= 30.0
        # 10 ms left, but a batch is known to take >= 30 ms: rejected without running.
        tight = await asyncio.wait_for(_submit(sched, "a", 2, deadline=time.monotonic() + 0.010), 5.0)
        assert tight.outcome is Outcome.DROPPED_DEADLINE and tight.batch_size == 0
        roomy = await asyncio.wait_for(_submit(sched, "a", 3, deadline=time.monotonic() + 5.0), 5.0)
        assert roomy.outcome is Outcome.PROCESSED
        assert calls == [1, 1]
    finally:
        await sched.close()


async def test_submit_before_start_is_an_error() -> None:
    sched = FrameScheduler(Recorder(), SchedulerConfig())
    with pytest.raises(RuntimeError):
        _submit(sched, "a", 1)
    await sched.close()  # closing a never-started scheduler is fine
    assert _batch_threads() == []
