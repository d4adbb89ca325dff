"""Per-session face settings over WHIP: ?mask=, ?faces= and ?shape= reach the session's FaceTrack; bad
values, and a reference selector without the ArcFace embedder, are refused with one-line 4xx answers."""

from __future__ import annotations

from dataclasses import replace

import aiohttp
import cv2
import numpy as np

from engines.frames import FaceSettings, FrameItem, FrameOutput
from engines.pipeline_config import PipelineConfig
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish
from tests.harness.waiting import wait_for

SDP = {"Content-Type": "application/sdp"}


class SettingsPipeline(FakePipeline):
    """Remembers the face settings each frame carried (the session's FaceTrack)."""

    def __init__(self) -> None:
        super().__init__()
        self.settings: list[FaceSettings | None] = []

    def process(self, items: list[FrameItem]) -> list[FrameOutput]:
        self.settings.extend(i.track.settings if i.track is not None else None for i in items)
        return super().process(items)


async def test_face_settings_reach_the_session_and_bad_ones_are_refused(astronaut: np.ndarray) -> None:
    pipeline = SettingsPipeline()
    config = replace(gw_config(), pipeline=PipelineConfig(keep_regions=("mouth",), shape=0.5))
    async with (
        running_gateway(config, pipeline=pipeline, monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        _, png = cv2.imencode(".png", cv2.cvtColor(astronaut, cv2.COLOR_RGB2BGR))
        png_type = {"Content-Type": "image/png"}
        async with http.post(gw.url + "/sources", data=png.tobytes(), headers=png_type) as r:
            source = (await r.json())["id"]
        for query, status, words in (
            ("?mask=nose", 400, "nose"),
            ("?faces=all", 400, "faces"),
            ("?shape=2", 400, "shape"),
            ("?shape=abc", 400, "shape"),
            ("?shape=nan", 400, "shape"),
            (f"?faces=reference&reference={source}", 422, "ArcFace"),
        ):
            async with http.post(gw.url + "/whip" + query, data="v=0", headers=SDP) as r:
                text = (await r.text()).strip()
                assert r.status == status and words in text and "\n" not in text, (query, r.status, text)

        frames = [cv2.resize(astronaut, (160, 120))]
        pub = await publish(http, gw.url, frames, query=f"?source={source}&faces=one&mask=none&shape=0.25")
        try:
            assert await wait_for(lambda: len(pipeline.settings) >= 3, 20)
            got = pipeline.settings[-1]
            assert got is not None and got.selector == "one" and got.keep_regions == () and got.shape == 0.25
        finally:
            await pub.close()
        pipeline.settings.clear()
        pub = await publish(http, gw.url, frames, query=f"?source={source}&faces=many")
        try:
            assert await wait_for(lambda: len(pipeline.settings) >= 3, 20)
            got = pipeline.settings[-1]  # ?mask= absent: the gateway's --mask-regions
            assert got is not None and got.selector == "many" and got.keep_regions == ("mouth",)
            assert got.shape == 0.5  # ?shape= absent: the gateway's --face-shape
        finally:
            await pub.close()
