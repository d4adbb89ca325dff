"""/api/stats "decoder" and "encoder" and a start-up event each say which video decoder and H.264 encoder
run (software here, with the reason); `--no-hardware-codecs` keeps both in software and says so."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import aiohttp
import pytest

from gateway.cli import build_config, build_parser
from gateway.webrtc.codecs import hw_decode, hw_encode
from tests.harness.fakes import FakePipeline
from tests.harness.gateway import gw_config, running_gateway


async def _stats(hardware_codecs: bool) -> dict[str, Any]:
    config = gw_config()
    config = replace(config, sessions=replace(config.sessions, hardware_codecs=hardware_codecs))
    async with running_gateway(config, pipeline=FakePipeline()) as gw, aiohttp.ClientSession() as http:
        async with http.get(f"{gw.url}/api/stats") as r:
            assert r.status == 200
            stats: dict[str, Any] = await r.json()
    return stats


async def test_stats_and_events_name_the_decoder_and_the_encoder() -> None:
    stats = await _stats(hardware_codecs=True)
    decoder, encoder = stats["decoder"], stats["encoder"]
    said = [e["message"] for e in stats["events"] if e["kind"] in (hw_decode.EVENT, hw_encode.EVENT)]
    assert any(m.startswith("video decode: h264: ") for m in said), said
    assert any(m.startswith("video encode: h264: ") for m in said), said
    assert set(decoder["decoders"]) == set(hw_decode.HARDWARE)
    for mime, name in decoder["decoders"].items():
        assert name in (hw_decode.SOFTWARE, hw_decode.HARDWARE[mime])
        assert (name == hw_decode.SOFTWARE) == (mime in decoder["software_reasons"])
    h264 = encoder["encoders"]["video/h264"]
    assert h264 in (hw_encode.SOFTWARE, hw_encode.HARDWARE)
    assert (h264 == hw_encode.SOFTWARE) == ("video/h264" in encoder["software_reasons"])
    assert decoder["hardware_fallbacks"] == 0 and encoder["hardware_fallbacks"] == 0


async def test_hardware_codecs_turned_off_run_software_and_say_why() -> None:
    stats = await _stats(hardware_codecs=False)
    decoder, encoder = stats["decoder"], stats["encoder"]
    assert set(decoder["decoders"].values()) == {hw_decode.SOFTWARE}
    assert set(decoder["software_reasons"].values()) == {"hardware decode is turned off"}
    assert encoder["encoders"]["video/h264"] == hw_encode.SOFTWARE
    assert encoder["software_reasons"]["video/h264"] == "hardware encode is turned off"


@pytest.mark.parametrize(("argv", "expected"), [([], True), (["--no-hardware-codecs"], False)])
def test_the_flag_reaches_the_session_config(argv: list[str], expected: bool) -> None:
    config = build_config(build_parser().parse_args(argv))
    assert config.sessions.hardware_codecs is expected
