"""/api/stats "encoder" and a start-up event say which H.264 encoder runs (software here, with the reason)."""

from __future__ import annotations

import aiohttp

from gateway.webrtc.codecs import hw_encode
from tests.integration.conftest import FakePipeline, gw_config, running_gateway


async def test_stats_and_events_name_the_encoder() -> None:
    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        async with http.get(f"{gw.url}/api/stats") as r:
            assert r.status == 200
            stats = await r.json()
    encoder = stats["encoder"]
    said = [e for e in stats["events"] if e["kind"] == hw_encode.EVENT]
    assert said and said[0]["message"].startswith("video encode: h264: ")
    h264 = encoder["encoders"]["video/h264"]
    assert h264 in (hw_encode.SOFTWARE, hw_encode.HARDWARE)
    assert (h264 == hw_encode.SOFTWARE) == ("video/h264" in encoder["software_reasons"])
    assert encoder["hardware_fallbacks"] == 0
