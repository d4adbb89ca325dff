"""Two gateways share one real Triton (nvidia-pytriton wheel) on 127.0.0.1, with real aiortc publishers.

- Every frame is processed through Triton (one gateway over gRPC, the other over system shared memory):
  none fails or misses its deadline; the only tolerated loss is the live-video policy replacing a waiting
  frame by a newer one when the shared box is busy (<= 5 %). Triton's own counters show executions that
  merged requests of BOTH gateways: each gateway runs one batch at a time (workers=1), so it never has two
  requests in flight for a model; an execution that served more requests than it ran
  (`nv_inference_request_success` > `nv_inference_exec_count`) therefore mixed the two gateways' frames.
- Triton killed mid-stream: sessions keep streaming (late policy), /readyz turns 503 naming the engines,
  `engine_unavailable` is logged; restarted: /readyz 200, `engine_recovered`, frames are processed again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engines.backends.triton_engine import TritonConfig
from engines.factory import EngineConfig
from engines.models.store import ModelStore
from engines.pipeline_config import PipelineConfig
from engines.triton.server import TritonProcess
from gateway.http.keys import MONITOR
from gateway.scheduler import SchedulerConfig
from tests.harness.gateway import gw_config, start_gateway
from tests.harness.media import carphone_frames
from tests.harness.peers import publish, source_query
from tests.harness.triton_server import build_repository, grpc_url, metrics, start_triton
from tests.harness.waiting import wait_for

FPS = 6.0


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, model_store: ModelStore) -> Path:
    # a long queue delay with preferred batch 2: Triton holds a lone request for a partner from the other
    # gateway, so merging does not hinge on the two gateways' timing
    return build_repository(
        tmp_path_factory.mktemp("triton") / "repo", model_store.root, preferred=(2,), delay_us=30_000
    )


@pytest.fixture()
def triton(repo: Path, tmp_path: Path) -> Iterator[TritonProcess]:
    server = start_triton(repo, tmp_path / "triton.log", tmp_path)
    yield server
    server.stop()


def _config(server: TritonProcess, model_dir: Path, shm: bool = False) -> Any:
    base = gw_config()
    return replace(
        base,
        pipeline=PipelineConfig(
            engine=EngineConfig(
                backend="triton", triton=TritonConfig(url=grpc_url(server), timeout_s=3.0, shm=shm)
            ),
        ),
        model_dir=model_dir,
        # one batch at a time per gateway (see the module docstring); a generous budget: this test is about
        # where frames go, and the shared 2-core box must not turn it into a timing test
        scheduler=SchedulerConfig(workers=1, budget_ms=2000.0, max_batch=4),
    )


async def _stats(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(url + "/api/stats") as r:
        assert r.status == 200
        return dict(await r.json())


async def test_two_gateways_share_triton_batches(
    triton: TritonProcess, model_store: ModelStore, media: dict[str, Path], astronaut: Any
) -> None:
    images = carphone_frames(media["carphone_pristine.mp4"])
    # one gateway sends tensors over gRPC, the other through system shared memory: both paths, one batcher
    gws = [await start_gateway(_config(triton, model_store.root, shm=shm)) for shm in (False, True)]
    clients = []
    try:
        async with aiohttp.ClientSession() as http:
            for gw in gws:
                async with http.get(gw.url + "/readyz") as r:
                    assert r.status == 200, await r.text()
            queries = [await source_query(http, gw.url, astronaut) for gw in gws]
            before = metrics(triton)
            clients = [
                await publish(http, gw.url, images, fps=FPS, query=q)
                for gw, q in zip(gws, queries, strict=True)
            ]
            assert await wait_for(lambda: all(len(c.received.ids) >= 40 for c in clients), 60)
            for c in clients:
                await c.close()
            clients = []
            after = metrics(triton)
            for gw in gws:
                frames = (await _stats(http, gw.url))["frames"]
                assert frames["processed"] >= 40, frames
                dropped = frames["dropped"]
                # no frame failed in Triton; the only loss allowed is the live-video policy's own (a newer
                # frame replaced one still waiting, or one missed its deadline), which a busy machine causes
                # and which is counted: every frame received is accounted for. (How rare it stays is a
                # capacity figure: the Triton benchmark's.)
                assert dropped.get("error", 0) == 0, frames
                accounted = frames["processed"] + dropped.get("stale", 0) + dropped.get("deadline", 0)
                assert accounted == frames["received"], frames
        model = "face_landmarker"  # runs on every frame (the detector may run every Nth, tracking between)
        requests = after[("nv_inference_request_success", model)] - before.get(
            ("nv_inference_request_success", model), 0.0
        )
        execs = after[("nv_inference_exec_count", model)] - before.get(
            ("nv_inference_exec_count", model), 0.0
        )
        items = after[("nv_inference_count", model)] - before.get(("nv_inference_count", model), 0.0)
        print(f"triton {model}: {requests=} {execs=} {items=}")
        assert requests >= 40, (requests, execs)
        assert items >= requests
        assert execs < requests, f"no execution merged the two gateways' requests ({requests=}, {execs=})"
    finally:
        for c in clients:
            await c.close()
        for gw in gws:
            await gw.stop()


async def test_triton_killed_and_restarted_mid_stream(
    triton: TritonProcess, model_store: ModelStore, media: dict[str, Path], astronaut: Any
) -> None:
    images = carphone_frames(media["carphone_pristine.mp4"])
    gw = await start_gateway(_config(triton, model_store.root))
    client = None
    try:
        async with aiohttp.ClientSession() as http:
            client = await publish(
                http, gw.url, images, fps=FPS, query=await source_query(http, gw.url, astronaut)
            )
            assert await wait_for(lambda: len(client.received.ids) >= 10, 40)
            processed_before = (await _stats(http, gw.url))["frames"]["processed"]
            assert processed_before > 0

            triton.kill()
            n_at_kill = len(client.received.ids)

            async def not_ready() -> bool:
                async with http.get(gw.url + "/readyz") as r:
                    down = (await r.json()).get("engines_not_ready", [])
                    return r.status == 503 and "face_detector" in down

            assert await _eventually(not_ready, 15), "/readyz must turn 503 while Triton is gone"
            # the session keeps streaming: late-policy frames still reach the publisher
            assert await wait_for(lambda: len(client.received.ids) >= n_at_kill + 12, 30)
            frames = (await _stats(http, gw.url))["frames"]
            assert frames["dropped"].get("error", 0) > 0, frames
            kinds = [e.kind for e in gw.app[MONITOR].events.recent()]  # type: ignore[attr-defined]
            assert "engine_unavailable" in kinds and "engine_error" in kinds, kinds

            triton.start()
            triton.wait_ready(120)

            async def ready() -> bool:
                async with http.get(gw.url + "/readyz") as r:
                    return r.status == 200

            assert await _eventually(ready, 20), "/readyz must recover by itself"
            processed_mid = (await _stats(http, gw.url))["frames"]["processed"]

            async def processing_again() -> bool:
                return int((await _stats(http, gw.url))["frames"]["processed"]) >= processed_mid + 10

            assert await _eventually(processing_again, 30), "processing must resume after the restart"
            kinds = [e.kind for e in gw.app[MONITOR].events.recent()]  # type: ignore[attr-defined]
            assert "engine_recovered" in kinds, kinds
            assert client.pc.connectionState == "connected"
    finally:
        if client is not None:
            await client.close()
        await gw.stop()


async def _eventually(check: Any, timeout_s: float) -> bool:
    import asyncio
    import time

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if await check():
            return True
        await asyncio.sleep(0.25)
    return bool(await check())
