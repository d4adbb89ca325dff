"""WHIP end to end with real aiortc peers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import aiohttp
import cv2
import numpy as np

from gateway.monitoring.records import Outcome
from gateway.scheduler import SchedulerConfig
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish, source_query
from tests.harness.waiting import wait_for


def _threads() -> int:
    """Threads other than the event loop's default executor (shared by the whole test process)."""
    return sum(1 for t in threading.enumerate() if not t.name.startswith("asyncio_"))


def _face_frames(astronaut: np.ndarray, size: tuple[int, int] = (320, 240)) -> list[np.ndarray]:
    return [cv2.resize(astronaut, size)]


async def test_publisher_gets_processed_frames_back_in_order(astronaut: np.ndarray) -> None:
    monitor = RecordingMonitor()
    async with (
        running_gateway(gw_config(), pipeline=FakePipeline(), monitor=monitor) as gw,
        aiohttp.ClientSession() as http,
    ):
        query = await source_query(http, gw.url, astronaut)
        client = await publish(http, gw.url, _face_frames(astronaut), query=query)
        try:
            assert await wait_for(lambda: len(client.received.ids) >= 20, 30)
            ids = client.received.ids
            assert ids == sorted(ids) and len(set(ids)) == len(ids)  # frames leave in order, identity kept
            frame = client.received.frames[-1]
            r, g, _ = frame[5:40, 5:40].mean(axis=(0, 1))
            assert r > 180 and g < 50  # magenta block: the processed image came back
            assert frame.shape[:2] == (240, 320)
            async with http.get(gw.url + "/sessions") as resp:
                listing = await resp.json()
            assert len(listing["sessions"]) == 1 and listing["sessions"][0]["frames_out"] > 0
        finally:
            await client.close()
        records = [r for r in monitor.records if r.outcome is Outcome.PROCESSED]
        assert records and {"decode", "queue_wait", "encode", "face_swapper"} <= set(records[-1].stages_ms)
        assert records[-1].width == 320 and records[-1].server_ms > 0


async def test_slow_pipeline_drops_frames_instead_of_queueing(astronaut: np.ndarray) -> None:
    monitor = RecordingMonitor()
    slow = FakePipeline(delay_s=0.25)  # 4 fps capacity against 15 fps input
    config = replace(gw_config(), scheduler=SchedulerConfig(budget_ms=600.0))
    async with running_gateway(config, pipeline=slow, monitor=monitor) as gw, aiohttp.ClientSession() as http:
        query = await source_query(http, gw.url, astronaut)
        client = await publish(http, gw.url, _face_frames(astronaut), fps=15, query=query)
        try:
            assert await wait_for(lambda: len(client.received.ids) >= 12, 40)
            await asyncio.sleep(2.0)
        finally:
            await client.close()
    drops = [r for r in monitor.records if r.outcome is not Outcome.PROCESSED]
    processed = [r for r in monitor.records if r.outcome is Outcome.PROCESSED]
    assert drops, "an overloaded session must drop frames"
    assert len(drops) > len(processed)
    late = client.received.latency_s[len(client.received.latency_s) // 2 :]
    assert max(late) < 2.0, f"latency grew unbounded: {max(late):.2f}s"  # bounded, not seconds of backlog
    assert client.received.ids == sorted(client.received.ids)


async def test_four_publishers_share_batches(astronaut: np.ndarray) -> None:
    # One worker, 50 ms a batch, 4 x 10 fps: unbatched that is 2 s of work a second, so frames of several
    # sessions are waiting whenever the worker frees, on a quiet machine or a busy one. A roomy budget (and
    # no per-interval deadline): on a busy machine the measured batch time grows and the deadline policy
    # would rightly shrink batches to one frame; that policy has its own tests.
    pipeline = FakePipeline(delay_s=0.05)
    config = replace(
        gw_config(),
        scheduler=SchedulerConfig(
            max_batch=8, max_queue_delay_ms=20.0, workers=1, budget_ms=3000.0, interval_deadline_batches=0.0
        ),
    )
    async with (
        running_gateway(config, pipeline=pipeline, monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        query = await source_query(http, gw.url, astronaut)
        frames = _face_frames(astronaut, (160, 120))
        clients = [await publish(http, gw.url, frames, fps=10, query=query) for _ in range(4)]
        try:
            assert await wait_for(lambda: all(len(c.received.ids) >= 10 for c in clients), 40)
        finally:
            await asyncio.gather(*(c.close() for c in clients))
    assert sum(pipeline.batches) / len(pipeline.batches) > 1.0, pipeline.batches


async def test_killed_client_is_reaped_and_nothing_leaks(astronaut: np.ndarray) -> None:
    monitor = RecordingMonitor()
    config = gw_config(reap_after_s=1.0, connect_timeout_s=5.0)
    baseline_threads = _threads()
    async with (
        running_gateway(config, pipeline=FakePipeline(), monitor=monitor) as gw,
        aiohttp.ClientSession() as http,
    ):
        client = await publish(http, gw.url, _face_frames(astronaut))
        assert await wait_for(lambda: len(client.received.ids) >= 5, 30)
        from gateway.http.keys import sessions_of

        manager = sessions_of(gw.app)
        assert manager.counts()["sessions"] == 1
        # "kill" the client: stop its tasks and sockets without any goodbye (no DTLS close, no DELETE)
        for t in client.tasks:
            t.cancel()
        assert client.sender_track is not None
        client.sender_track.stop()
        assert await wait_for(lambda: manager.counts()["sessions"] == 0, 10)
        assert manager.counts() == {"sessions": 0, "viewers": 0, "tasks": 0}
        assert monitor.closed_sessions and "no media" in monitor.closed_sessions[0][1]
        await client.pc.close()
        assert not [
            t
            for t in asyncio.all_tasks()
            if t.get_name().startswith("session-") and t.get_name() != "session-reaper"
        ]
    # aiortc's decoder threads and the gateway's workers are gone once the gateway stopped
    assert await wait_for(lambda: _threads() <= baseline_threads, 10), threading.enumerate()


async def test_sessions_without_a_source_pass_through_without_batching(astronaut: np.ndarray) -> None:
    """No source face = nothing to swap: frames come back unprocessed and never wait in the batcher."""
    pipeline = FakePipeline()
    async with (
        running_gateway(gw_config(), pipeline=pipeline) as gw,
        aiohttp.ClientSession() as http,
    ):
        client = await publish(http, gw.url, _face_frames(astronaut))
        try:
            assert await wait_for(lambda: len(client.received.ids) >= 10, 30)
            frame = client.received.frames[-1]
            r, g, _ = frame[5:40, 5:40].mean(axis=(0, 1))
            assert r < 140 and g > 30  # the astronaut's corner, no magenta block: the pipeline never ran
            assert pipeline.batches == []
        finally:
            await client.close()
