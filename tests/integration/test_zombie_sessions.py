"""Offers that cannot be answered never hold an admission slot.

Before the fix: `a=group:BUNDLE -1 1` or an m-line without `a=mid` got a 500 and left a session nobody could
remove (16 of them locked every publisher out); `c=IN IP6 zz` got 201 and every later PATCH a 500; a
non-UTF-8 Authorization header got a 500.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import aiohttp
import cv2
import numpy as np
import pytest
from aiortc import RTCPeerConnection

import gateway.session.manager as sessions_module
from bench.fuzz import real_offer
from gateway.auth import AuthConfig
from gateway.http.keys import STATE
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish
from tests.harness.waiting import wait_for

SDP = {"Content-Type": "application/sdp"}


def _held(gw: Any) -> int:
    return len(gw.app[STATE].sessions.sessions)


async def test_unanswerable_offers_are_400_and_hold_no_slot(astronaut: np.ndarray) -> None:
    config = gw_config(max_sessions=3)
    async with (
        running_gateway(config, pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        av_offer = await real_offer()
        video_only = await real_offer(audio=False)
        bad = {
            "bundle names a missing mid": av_offer.replace("a=group:BUNDLE 0 1", "a=group:BUNDLE -1 1"),
            "audio m-line without mid": av_offer.replace("a=mid:0\r\n", ""),
            "video-only without mid": video_only.replace("a=mid:0\r\n", ""),
            "duplicate mid": av_offer.replace("a=mid:1\r\n", "a=mid:0\r\n"),
            "c= not an address": av_offer.replace("c=IN IP4 127.0.0.1", "c=IN IP6 zz"),
            "c= IP4 with IPv6 address": av_offer.replace("c=IN IP4 127.0.0.1", "c=IN IP4 ::1"),
            "candidate with a DNS name": av_offer.replace(
                "a=candidate:", "a=candidate:1 1 udp 1 evil.example 9 typ host\r\na=candidate:", 1
            ),
        }
        assert "c=IN IP4 127.0.0.1" in av_offer
        for name, sdp in bad.items():
            for _ in range(4):  # more than max_sessions: none of them may be kept
                async with http.post(gw.url + "/whip", data=sdp, headers=SDP) as r:
                    text = await r.text()
                    assert r.status == 400, (name, r.status, text)
                    assert text.count("\n") == 1
            assert _held(gw) == 0, name
        async with http.get(gw.url + "/sessions") as r:
            assert r.status == 200
            assert (await r.json())["sessions"] == []
        pub = await publish(http, gw.url, [cv2.resize(astronaut, (160, 120))])
        try:
            assert await wait_for(lambda: len(pub.received.ids) >= 3, 30)
        finally:
            await pub.close()


async def test_audio_without_usable_codec_is_answered_inactive(astronaut: np.ndarray) -> None:
    async with (
        running_gateway(gw_config(), pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        offer = await real_offer()
        audio_start = offer.index("m=audio")
        video_start = offer.index("m=video")
        audio = offer[audio_start:video_start]
        lines = [ln for ln in audio.split("\r\n") if ln]
        kept = [ln for ln in lines[1:] if not ln.startswith(("a=rtpmap:", "a=fmtp:", "a=rtcp-fb:"))]
        parts = lines[0].split()
        aac = [" ".join([*parts[:3], "101"]), *kept, "a=rtpmap:101 MP4A-LATM/90000"]
        odd = offer[:audio_start] + "\r\n".join(aac) + "\r\n" + offer[video_start:]
        async with http.post(gw.url + "/whip", data=odd, headers=SDP) as r:
            answer = await r.text()
            assert r.status == 201, answer
        audio_answer = answer[answer.index("m=audio") : answer.index("m=video")]
        assert re.match(r"m=audio \d+ UDP/TLS/RTP/SAVPF 101\r\n", audio_answer), audio_answer
        assert "a=inactive" in audio_answer
        assert "PCMU" not in audio_answer and "a=rtpmap:101 MP4A-LATM/90000" in audio_answer


async def test_failure_while_answering_releases_the_slot(
    monkeypatch: pytest.MonkeyPatch, astronaut: np.ndarray
) -> None:
    """Whatever fails while the answer is built, and even when closing the half-built peer fails too,
    the session leaves the table (it had stayed forever, holding a slot)."""
    real_open = sessions_module.open_peer_connection
    broken = {"on": True}

    def open_connection(ice: Any, label: str) -> tuple[RTCPeerConnection, Any]:
        pc, dtls = real_open(ice, label)
        if broken["on"]:

            async def no_answer() -> Any:
                raise RuntimeError("injected answer failure")

            async def no_close() -> None:
                raise AttributeError("'NoneType' object has no attribute 'transport'")

            pc.createAnswer = no_answer  # type: ignore[method-assign]
            pc.close = no_close  # type: ignore[method-assign]
        return pc, dtls

    monkeypatch.setattr(sessions_module, "open_peer_connection", open_connection)
    async with (
        running_gateway(gw_config(max_sessions=2), pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        for _ in range(5):
            async with http.post(gw.url + "/whip", data=await real_offer(False), headers=SDP) as r:
                assert r.status == 400, await r.text()
        assert _held(gw) == 0
        broken["on"] = False
        pub = await publish(http, gw.url, [cv2.resize(astronaut, (160, 120))])
        try:
            assert await wait_for(lambda: len(pub.received.ids) >= 3, 30)
        finally:
            await pub.close()


async def test_pending_budget_never_locks_out_a_real_publisher(astronaut: np.ndarray) -> None:
    """Offers that never connect fill only the pending budget; past the grace period the oldest gives way."""
    grace_s = 3.0  # longer than 13 refused POSTs take on a loaded machine (the offers are made beforehand)
    config = gw_config(max_sessions=16, max_pending=3, pending_grace_s=grace_s, connect_timeout_s=60.0)
    async with (
        running_gateway(config, pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        offers = [await real_offer(False) for _ in range(16)]  # never connect: the client closes at once
        statuses = []
        third_held = 0.0
        for offer in offers:
            async with http.post(gw.url + "/whip", data=offer, headers=SDP) as r:
                statuses.append(r.status)
                if len(statuses) == 3:
                    third_held = time.monotonic()
                if r.status == 503:
                    assert "connecting" in await r.text() and r.headers["Retry-After"]
        assert time.monotonic() - third_held < grace_s, "the storm outlasted the grace: it proves nothing"
        assert statuses[:3] == [201, 201, 201] and set(statuses[3:]) == {503}, statuses
        assert _held(gw) == 3
        await asyncio.sleep(max(0.0, third_held + grace_s + 0.2 - time.monotonic()))  # past the grace
        pub = await publish(http, gw.url, [cv2.resize(astronaut, (160, 120))])
        try:
            assert await wait_for(lambda: len(pub.received.ids) >= 3, 30)
            assert _held(gw) == 3  # one zombie evicted, the publisher in
            async with http.get(gw.url + "/sessions") as r:
                states = [s["state"] for s in (await r.json())["sessions"]]
            assert states.count("connected") == 1
        finally:
            await pub.close()


async def test_reaper_drops_a_session_whose_close_hangs() -> None:
    async with (
        running_gateway(
            gw_config(connect_timeout_s=0.5), pipeline=FakePipeline(), monitor=RecordingMonitor()
        ) as gw,
        aiohttp.ClientSession() as http,
    ):
        async with http.post(gw.url + "/whip", data=await real_offer(False), headers=SDP) as r:
            assert r.status == 201
        manager = gw.app[STATE].sessions
        (session,) = manager.sessions.values()
        hang = asyncio.Event()

        async def stuck(reason: str) -> None:
            await hang.wait()

        session._release = stuck  # type: ignore[method-assign]
        session.schedule_close("test")
        assert await wait_for(lambda: session.close_reason is not None, 2)
        assert _held(gw) == 1
        manager.reap_once(time.monotonic() + 1.0)
        assert _held(gw) == 0
        hang.set()


async def test_patch_after_odd_offer_and_bad_auth_header_are_4xx() -> None:
    config = gw_config()
    from dataclasses import replace

    config = replace(config, auth=AuthConfig(token="s3cret"))
    async with running_gateway(config, pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw:
        port = int(gw.url.rsplit(":", 1)[1])
        offer = (await real_offer(False)).replace("c=IN IP4 127.0.0.1", "c=IN IP6 zz")
        async with aiohttp.ClientSession() as http:
            headers = {**SDP, "Authorization": "Bearer s3cret"}
            async with http.post(gw.url + "/whip", data=offer, headers=headers) as r:
                assert r.status == 400, await r.text()
        for raw in (b"Bearer \xff\xfe", b"\xc3\x28 \xa0\xa1", b"Bearer s3cret\x80"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"DELETE /whip/x HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: "
                + raw
                + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            await writer.drain()
            status_line = await asyncio.wait_for(reader.readline(), 10)
            writer.close()
            status = int(status_line.split()[1])
            assert status in (400, 401), (raw, status_line)


async def test_trickle_candidates_must_be_addresses() -> None:
    """A trickled candidate naming a host (the gateway would resolve it) or an impossible port is a 400."""
    async with (
        running_gateway(gw_config(), pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        async with http.post(gw.url + "/whip", data=await real_offer(False), headers=SDP) as r:
            assert r.status == 201
            location = r.headers["Location"]
        trickle = {"Content-Type": "application/trickle-ice-sdpfrag", "If-Match": "*"}
        cases = {
            "1 1 udp 1 evil.example 9 typ host": 400,
            "1 1 udp 1 127.0.0.1 70000 typ host": 400,
            "1 1 udp 1 1.2.3.4.5 9 typ host": 400,
            "1 1 udp 1 127.0.0.1 9 typ host": 204,
            "1 1 udp 1 0a1b2c3d-aaaa.local 9 typ host": 204,
        }
        for candidate, expected in cases.items():
            body = f"a=mid:0\r\na=candidate:{candidate}\r\n"
            async with http.patch(gw.url + location, data=body, headers=trickle) as r:
                assert r.status == expected, (candidate, r.status, await r.text())
