"""/api/stats "decoder" and a start-up event say which video decoder runs per codec (software here, with
the reason)."""

from __future__ import annotations

import aiohttp

from gateway.webrtc.codecs import hw_decode
from tests.integration.conftest import FakePipeline, gw_config, running_gateway


async def test_stats_and_events_name_the_decoder() -> None:
    async with running_gateway(gw_config(), pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        async with http.get(f"{gw.url}/api/stats") as r:
            assert r.status == 200
            stats = await r.json()
    decoder = stats["decoder"]
    said = [e for e in stats["events"] if e["kind"] == hw_decode.EVENT]
    assert said and said[0]["message"].startswith("video decode: h264: ")
    assert set(decoder["decoders"]) == set(hw_decode.HARDWARE)
    for mime, name in decoder["decoders"].items():
        assert name in (hw_decode.SOFTWARE, hw_decode.HARDWARE[mime])
        assert (name == hw_decode.SOFTWARE) == (mime in decoder["software_reasons"])
    assert decoder["hardware_fallbacks"] == 0
