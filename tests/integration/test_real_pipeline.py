"""The gateway with everything real: the default pipeline (RetinaFace + FaceMesh + mesh_warp on ONNX Runtime
CPU), the default Monitor, aiortc peers on 127.0.0.1. A talking-head clip goes in with the astronaut as the
source face; the face region must come back changed, the background must not, and frame ids must survive."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import numpy as np

from tests.harness.gateway import gw_config, running_gateway
from tests.harness.media import carphone_frames
from tests.harness.peers import publish
from tests.harness.waiting import wait_for

SIZE = (320, 240)
# Where carphone's face sits once scaled to 320x240 (RetinaFace finds it near x 95-205, y 55-165).
FACE = (slice(70, 150), slice(120, 190))
BACKGROUND = (slice(0, 180), slice(0, 60))  # left strip, above the stamp band


def _region_diff(a: np.ndarray, b: np.ndarray, region: tuple[slice, slice]) -> float:
    return float(np.abs(a[region].astype(np.int16) - b[region].astype(np.int16)).mean())


async def test_real_pipeline_swaps_faces_and_monitor_reports(
    media: dict[str, Path], model_store: object
) -> None:
    images = carphone_frames(media["carphone_pristine.mp4"], size=SIZE)
    async with running_gateway(gw_config()) as gw, aiohttp.ClientSession() as http:
        async with http.get(gw.url + "/readyz") as r:
            assert r.status == 200
        with open(media["astronaut.png"], "rb") as fh:
            async with http.post(
                gw.url + "/sources", data=fh.read(), headers={"Content-Type": "image/png"}
            ) as r:
                assert r.status == 201, await r.text()
                source_id = (await r.json())["id"]
        client = await publish(http, gw.url, images, query=f"?source={source_id}")
        session_id = client.location.rsplit("/", 1)[-1]
        try:
            assert await wait_for(lambda: len(client.received.ids) >= 30, 40)
            ids = client.received.ids
            assert ids == sorted(ids), "frames must leave in order"
            assert len(set(ids)) >= 20, "frame ids must survive the round trip"
            face_diffs, bg_diffs = [], []
            for frame, fid in zip(client.received.frames, client.received.frame_ids, strict=True):
                assert frame.shape[:2] == (SIZE[1], SIZE[0])
                sent = images[fid % len(images)]
                face_diffs.append(_region_diff(frame, sent, FACE))
                bg_diffs.append(_region_diff(frame, sent, BACKGROUND))
            # the face was swapped (on a busy machine the monitor's degradation may lighten some frames' work,
            # so the strongest change is what shows the swap) and the change is in the face, not everywhere
            assert max(face_diffs) > 12.0, (face_diffs, bg_diffs)
            assert np.median(face_diffs) > 2 * np.median(bg_diffs), (face_diffs, bg_diffs)

            # the real Monitor saw those frames: per-session stats, the JSON snapshot, Prometheus
            async with http.get(f"{gw.url}/sessions/{session_id}") as r:
                assert r.status == 200
                stats = (await r.json())["stats"]
            assert stats["frames_out"] > 0 and stats["fps_out"] > 0
            assert stats["server_ms"]["count"] > 0
            assert 0 < stats["server_ms"]["p50"] <= stats["server_ms"]["p95"]
            assert set(stats["dropped"]) and stats["width"] == SIZE[0]
            async with http.get(gw.url + "/api/stats") as r:
                assert r.status == 200
                snapshot = await r.json()
            assert snapshot["frames"]["processed"] > 0 and snapshot["latency"]["server_ms"]["count"] > 0
            assert "face_swapper" in snapshot["latency"]["stages_ms"]
            assert session_id in [s["session_id"] for s in snapshot["sessions"]["list"]]
            sched = snapshot["scheduler"]  # why each batch left the queue: one counted reason per batch
            assert sched["batches_run"] > 0
            assert sum(sched["dispatch_reasons"].values()) == sched["batches_run"]
            async with http.get(gw.url + "/metrics") as r:
                assert r.status == 200
                metrics = await r.text()
            assert _sample(metrics, 'livefuse_frames_total{outcome="processed"}') > 0, metrics[:2000]
            assert _sample(metrics, "livefuse_server_latency_seconds_count") > 0
            assert _sample(metrics, 'livefuse_batch_dispatch_total{reason="partner_not_expected"}') > 0
        finally:
            await client.close()


def _sample(text: str, series: str) -> float:
    """Value of one Prometheus sample line (name plus labels exactly as exposed)."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[-1])
    raise AssertionError(f"{series} not in /metrics")
