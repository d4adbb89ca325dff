"""--public-url: WHIP/WHEP Location headers are absolute URLs of THIS replica, and the session's PATCH
(trickle) and DELETE sent to those absolute URLs work — what a client behind a load balancer needs."""

from __future__ import annotations

from dataclasses import replace

import aiohttp
import numpy as np
import pytest
from aiohttp import web

from gateway.app import create_app, wait_started
from loadgen.embedded import free_port
from tests.harness.fakes import FakePipeline
from tests.harness.gateway import gw_config
from tests.harness.peers import publish, source_query, view
from tests.harness.waiting import wait_for


async def test_absolute_locations_lead_back_to_this_replica(astronaut: np.ndarray) -> None:
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    app = create_app(replace(gw_config(), public_url=public + "/"), pipeline=FakePipeline())
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    pub = viewer = None
    try:
        await wait_started(app, 30)
        async with aiohttp.ClientSession() as http:
            pub = await publish(
                http,
                public,
                [astronaut[:240, :320].copy()],
                query=await source_query(http, public, astronaut),
            )
            assert pub.location.startswith(public + "/whip/"), pub.location  # trailing slash normalised
            session_id = pub.location.rsplit("/", 1)[-1]
            viewer = await view(http, public, session_id, None)
            assert viewer.location.startswith(f"{public}/whep/{session_id}/"), viewer.location
            assert await wait_for(lambda: len(viewer.received.ids) > 3, 20)
            trickle = {"Content-Type": "application/trickle-ice-sdpfrag", "If-Match": "*"}
            end = "a=mid:0\r\na=end-of-candidates\r\n"
            async with http.patch(pub.location, data=end, headers=trickle) as r:
                assert r.status == 204, await r.text()
            async with http.delete(viewer.location) as r:
                assert r.status == 200
            async with http.delete(pub.location) as r:
                assert r.status == 200
            async with http.get(f"{public}/sessions/{session_id}") as r:
                assert r.status == 404
    finally:
        for c in (pub, viewer):
            if c is not None:
                await c.close()
        await runner.cleanup()


@pytest.mark.parametrize("bad", ["gw-3.example", "ftp://x", "http://x/?a=1", "/whip"])
def test_public_url_must_be_absolute_http(bad: str) -> None:
    with pytest.raises(ValueError, match="public URL"):
        replace(gw_config(), public_url=bad)
