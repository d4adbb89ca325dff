"""The dashboard in a real headless Chromium: the page loads, gets data over SSE from a running monitor
app fed with synthetic FrameRecords, its DOM shows that data, and a screenshot is kept under test-artifacts/.

Chromium is driven over the DevTools protocol (a websocket, via aiohttp) so the test can wait for live SSE
updates instead of guessing a virtual-time budget. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gateway.monitoring.monitor import Monitor, MonitorConfig
from gateway.monitoring.records import FrameRecord, LinkState, Outcome
from gateway.monitoring.routes import setup_monitoring_routes
from loadgen.chromium import CHROMIUM, HEADLESS_FLAGS, launch
from loadgen.embedded import start_site

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_FLAGS = (
    *HEADLESS_FLAGS,
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--hide-scrollbars",
    "--window-size=1400,1100",
)
TOKEN = "s3cret-token"
UPDATES_JS = "Number(document.body && document.body.dataset.updates || 0)"


@web.middleware
async def _token_auth(request: web.Request, handler: Any) -> web.StreamResponse:
    """Stands in for the gateway's auth middleware: proves the page forwards ?token= on every request."""
    if request.query.get("token") != TOKEN:
        raise web.HTTPUnauthorized(text="token required")
    result: web.StreamResponse = await handler(request)
    return result


async def _feed(monitor: Monitor) -> None:
    """Two sessions at ~20 fps of synthetic frames, some late ones and a few drops (ends when cancelled)."""
    monitor.session_opened("cam-a", {"remote": "127.0.0.1"})
    monitor.session_opened("cam-b", {"remote": "127.0.0.1"})
    monitor.session_link("cam-a", LinkState(send_bps=480_000, queue_s=0.0124, loss=0.0))
    monitor.session_link("cam-b", LinkState(send_bps=480_000, queue_s=0.0124, loss=0.0))
    for i in itertools.count():
        for sid, base in (("cam-a", 40.0), ("cam-b", 90.0)):
            if i % 17 == 5:
                outcome = Outcome.DROPPED_STALE
            elif sid == "cam-b" and i % 29 == 7:
                outcome = Outcome.DROPPED_DEADLINE
            else:
                outcome = Outcome.PROCESSED
            server = base + (i % 11) * 7.0 + (120.0 if i % 23 == 0 else 0.0)
            monitor.record_frame(
                FrameRecord(
                    session_id=sid,
                    frame_id=i,
                    arrival_s=time.monotonic(),
                    outcome=outcome,
                    server_ms=server,
                    stages_ms={
                        "decode": 0.6,
                        "queue_wait": 4.0 + i % 5,
                        "face_detector": 9.0,
                        "face_landmarker": 4.0,
                        "face_swapper": 20.0,
                        "paste_back": 2.0,
                        "encode": 2.1,
                    },
                    batch_sizes={"face_detector": 2, "face_landmarker": 2, "face_swapper": 2},
                    faces=1,
                    width=320,
                    height=240,
                )
            )
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def _monitor_app() -> AsyncIterator[tuple[str, Monitor]]:
    monitor = Monitor(MonitorConfig(sample_interval_s=0.25, nvml=True))
    app = web.Application(middlewares=[_token_auth])
    setup_monitoring_routes(app, monitor)
    runner = web.AppRunner(app, shutdown_timeout=2.0)
    await runner.setup()
    port = await start_site(runner)
    await monitor.start()
    feeder = asyncio.create_task(_feed(monitor))
    try:
        yield f"http://127.0.0.1:{port}", monitor
    finally:
        feeder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await feeder
        await runner.cleanup()
        await monitor.close()


async def test_dashboard_shows_live_data_in_chromium() -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (apt-get install -y chromium)")
    async with (
        _monitor_app() as (base, monitor),
        launch("about:blank", flags=CHROMIUM_FLAGS, reply_timeout_s=20) as browser,
    ):
        page = browser.page
        await page.call("Page.enable")
        await page.call("Runtime.enable")
        # "/" redirects to the dashboard, keeping the token.
        await page.call("Page.navigate", url=f"{base}/?token={TOKEN}")
        updates = 0
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            updates = int(await page.evaluate(UPDATES_JS) or 0)
            if updates >= 4:
                break
            await asyncio.sleep(0.25)
        assert updates >= 4, "the page got fewer than 4 stats updates (initial fetch + SSE)"

        dom = await page.evaluate("""JSON.stringify({
            url: location.pathname,
            conn: document.querySelector('#conn b').textContent,
            open: document.getElementById('sessions-open').textContent,
            rows: [...document.querySelectorAll('#sessions-body tr')].map(r => r.dataset.session),
            firstRow: [...document.querySelectorAll('#sessions-body tr:first-child td')].map(td =>
            td.textContent),
            events: [...document.querySelectorAll('#events li')].map(li => li.className),
            gpu: document.getElementById('gpu-status').textContent,
            budget: document.getElementById('budget').textContent,
            p95: document.getElementById('p95').textContent,
            utilPoints: window.__lf.util.length,
            fpsSessions: window.__lf.fps.size,
            histNote: document.getElementById('hist-note').textContent,
        })""")
        info = json.loads(dom)
        assert info["url"] == "/dashboard"
        assert info["conn"] == "live"
        assert info["open"] == "2"
        assert sorted(info["rows"]) == ["cam-a", "cam-b"]
        assert info["firstRow"][1] == "320x240" and float(info["firstRow"][3]) > 0  # size and fps in
        assert info["firstRow"][13:15] == ["480", "12"]  # the processed stream's rate and its worst queue
        assert "session_open" in info["events"]
        assert info["budget"] == "150 ms" and info["p95"].endswith("ms")
        assert info["utilPoints"] >= 2 and info["fpsSessions"] == 2
        assert int(info["histNote"].split()[0]) > 0
        snap = monitor.snapshot()
        assert info["gpu"] == ("no GPU" if not snap.gpu.available else info["gpu"])

        # Every chart canvas has pixels drawn on it (not just a blank backing store).
        painted = await page.evaluate("""[...document.querySelectorAll('canvas')].map(c => {
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return [c.id, n]; })""")
        assert len(painted) == 6
        for cid, n in painted:
            assert n > 200, f"{cid} looks empty"

        shot = await page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        png = base64.b64decode(shot["data"])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "dashboard.png").write_bytes(png)


async def test_dashboard_requests_carry_the_token(tmp_path: Path) -> None:
    """Without the token the auth middleware refuses the page's requests: the page itself must forward it."""
    async with _monitor_app() as (base, _monitor), aiohttp.ClientSession() as http:
        async with http.get(f"{base}/dashboard") as r:
            assert r.status == 401
        async with http.get(f"{base}/dashboard?token={TOKEN}") as r:
            html = await r.text()
            assert r.status == 200 and '"dashboard.js" + window.location.search' in html
        async with http.get(f"{base}/dashboard.js?token={TOKEN}") as r:
            js = await r.text()
            assert r.status == 200 and '"api/stream" + q' in js and '"api/stats" + q' in js
