"""Bad input never hurts: hundreds of malformed requests get 4xx one-liners; a live session keeps going."""

from __future__ import annotations

import random

import aiohttp
import cv2
import numpy as np

from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish
from tests.harness.waiting import wait_for

VALID_START = (
    "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
    "a=group:BUNDLE 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n"
)


def _bodies(rng: random.Random) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for _ in range(40):
        out.append(("application/sdp", rng.randbytes(rng.randint(0, 400))))
        cut = VALID_START[: rng.randint(0, len(VALID_START))]
        out.append(("application/sdp", cut.encode()))
        out.append(
            ("application/sdp", (VALID_START + "a=rtpmap:96 VP8/90000\r\n" * rng.randint(0, 3)).encode())
        )
        out.append(
            (
                rng.choice(["image/png", "image/jpeg", "text/html", "application/json", ""]),
                rng.randbytes(rng.randint(0, 300)),
            )
        )
    return out


async def test_garbage_never_hurts_a_live_session(astronaut: np.ndarray) -> None:
    rng = random.Random(7)
    async with (
        running_gateway(gw_config(), pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        pub = await publish(http, gw.url, [cv2.resize(astronaut, (160, 120))])
        sid = pub.location.rsplit("/", 1)[-1]
        try:
            assert await wait_for(lambda: len(pub.received.ids) >= 3, 30)
            paths = [
                "/whip",
                f"/whep/{sid}",
                "/whep/unknown",
                "/sources",
                f"/whip/{sid}x",
                "/whip/unknown",
                "/sessions/unknown",
                "/sources/unknown",
                "/whip?processors=bogus",
                "/whip?dtls=1.3",
                "/whip?source=nope",
            ]
            statuses: list[int] = []
            for ctype, body in _bodies(rng):
                path = rng.choice(paths)
                method = rng.choice(["POST", "POST", "PATCH", "DELETE", "GET", "PUT"])
                headers = {"Content-Type": ctype} if ctype else {}
                async with http.request(method, gw.url + path, data=body, headers=headers) as r:
                    text = await r.text()
                    statuses.append(r.status)
                    assert 400 <= r.status < 500, (method, path, r.status, text)
                    assert text.count("\n") <= 1, text
            assert len(statuses) >= 160
            before = len(pub.received.ids)
            assert await wait_for(lambda: len(pub.received.ids) >= before + 10, 20), "live session stalled"
            async with http.get(gw.url + "/healthz") as r:
                assert r.status == 200
        finally:
            await pub.close()
