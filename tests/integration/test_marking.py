"""End to end: a real aiortc publisher on 127.0.0.1 sends 640x360 video through the gateway; a WHEP viewer
receives and decodes the output; in every 1-second window of it, the first after the viewer's keyframe too,
the public mark is found without the key and the payload (the gateway's key id, this session's code) with
it. The answers carry the disclosure header, /api/stats shows the session's marking, and a label set through
PATCH appears on the picture."""

from __future__ import annotations

import logging

import aiohttp
import cv2
import numpy as np
import pytest

from engines.marking.detect import Detector
from engines.marking.pattern import key_id, session_code
from gateway.marking.config import HEADER, MarkingConfig
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish, source_query, view
from tests.harness.waiting import wait_for

KEY = b"the gateway's mark key, 32 bytes"
FPS = 15


def _scene(astronaut: np.ndarray) -> list[np.ndarray]:
    """Thirty 640x360 frames: the portrait drifting over a soft gradient (a presenter before a plain wall;
    docs/BENCHMARKS.md has the mark on busier pictures)."""
    face = cv2.resize(astronaut, (300, 300))
    yy, xx = np.mgrid[0:360, 0:640].astype(np.float32)
    back = np.stack([60 + 50 * xx / 640, 70 + 40 * yy / 360, 150 - 40 * xx / 640], axis=-1).astype(np.uint8)
    frames = []
    for k in range(30):
        rgb = back.copy()
        x = 100 + int(80 * np.sin(2 * np.pi * k / 30))
        rgb[30:330, x : x + 300] = face
        frames.append(rgb)
    return frames


async def test_every_second_received_over_whep_carries_the_mark_and_payload(astronaut: np.ndarray) -> None:
    config = gw_config(marking=MarkingConfig(key=KEY))
    async with (
        running_gateway(config, pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        query = await source_query(http, gw.url, astronaut)
        pub = await publish(http, gw.url, _scene(astronaut), query=query, fps=FPS)
        session_id = pub.location.rsplit("/", 1)[-1]
        try:
            assert "trainedAlgorithmicMedia" in pub.received.answer_headers[HEADER]
            assert await wait_for(lambda: len(pub.received.ids) >= 5, 30)
            viewer = await view(http, gw.url, session_id, None, keep_luma=True)
            try:
                assert f"key-id={key_id(KEY)}" in viewer.received.answer_headers[HEADER]
                assert await wait_for(lambda: len(viewer.received.lumas) >= 5 * FPS, 30)
                # from the viewer's first frame: its keyframe, after which the mark starts stronger again
                lumas = [y for _, y in viewer.received.lumas[: 5 * FPS]]
                async with http.get(f"{gw.url}/api/stats") as resp:
                    stats = await resp.json()
                async with http.patch(f"{gw.url}/sessions/{session_id}", json={"label": "AI-generated"}) as r:
                    assert r.status == 200 and (await r.json())["label"] == "AI-generated"
                seen = len(viewer.received.lumas)
                assert await wait_for(lambda: len(viewer.received.lumas) >= seen + FPS, 20)
                labelled = viewer.received.lumas[-1][1]
            finally:
                await viewer.close()
        finally:
            await pub.close()
    public, keyed = Detector(), Detector(KEY)
    expected_code = session_code(KEY, session_id)
    for start in range(0, len(lumas), FPS):
        window = lumas[start : start + FPS]
        assert public.window(window).detected, f"second {start // FPS}: public mark not found"
        found = keyed.window(window)
        assert found.detected and found.payload is not None, f"second {start // FPS}: payload not read"
        assert (found.payload.key_id, found.payload.session_code) == (key_id(KEY), expected_code)
    row = next(s for s in stats["marking"]["sessions"] if s["session"] == session_id)
    assert row["mark"] is True and row["session_code"] == expected_code and row["frames_marked"] > 0
    assert stats["marking"]["enabled"] is True and stats["marking"]["key_id"] == key_id(KEY)
    band = labelled[:20, :130]
    assert (band < 40).mean() > 0.4 and (band > 180).sum() > 20  # the label: dark band, bright text


async def test_no_mark_is_logged_at_start_and_shown_in_stats(caplog: pytest.LogCaptureFixture) -> None:
    config = gw_config(marking=MarkingConfig(enabled=False))
    with caplog.at_level(logging.WARNING, logger="gateway.app_resources"):
        async with (
            running_gateway(config, pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
            aiohttp.ClientSession() as http,
        ):
            async with http.get(f"{gw.url}/api/stats") as resp:
                stats = await resp.json()
    assert stats["marking"]["enabled"] is False and "mark=off" in stats["marking"]["header"]
    assert any("NOT marked" in record.getMessage() for record in caplog.records)
