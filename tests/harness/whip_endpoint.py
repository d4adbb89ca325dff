"""A downstream WHIP endpoint made of aiortc, on 127.0.0.1: what a session's egress pushes into in tests.

It answers offers (RFC 9725: bearer token checked, 201 + a relative Location, Link ice-server headers on
OPTIONS), counts the video frames it decodes (with the loadgen stamp each carries) and the audio frames,
and closes the peer when its resource is DELETEd. `mode` makes it misbehave: `refuse` (401), `busy` (503
for the first `busy_for` POSTs), `silent` (201 with an answer whose peer is closed at once: ICE never
connects, as an endpoint that went away).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import numpy as np
from aiohttp import web
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig
from loadgen.embedded import start_site
from tests.harness.peers import read_id


@dataclass
class Pushed:
    """One resource: what arrived on it."""

    pc: RTCPeerConnection
    video_ids: list[int] = field(default_factory=list)
    last_video: np.ndarray | None = None  # RGB
    audio_frames: int = 0
    deleted: bool = False


@dataclass
class WhipEndpoint:
    token: str = "downstream-secret"
    mode: str = "ok"  # ok | refuse | busy | silent
    busy_for: int = 1
    ice_link: str | None = None  # a Link value advertised on OPTIONS
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    disclosures: list[str | None] = field(default_factory=list)  # each POST's Livefuse-Synthetic-Content
    resources: dict[str, Pushed] = field(default_factory=dict)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("OPTIONS", "/ingest/{name}", self._options)
        app.router.add_post("/ingest/{name}", self._post)
        app.router.add_delete("/resource/{key}", self._delete)
        app.on_shutdown.append(self._close)
        return app

    def _log(self, request: web.Request) -> bool:
        auth = request.headers.get("Authorization")
        self.requests.append((request.method, request.path, auth))
        if request.method == "POST":
            self.disclosures.append(request.headers.get("Livefuse-Synthetic-Content"))
        return auth == f"Bearer {self.token}"

    async def _options(self, request: web.Request) -> web.Response:
        self._log(request)
        response = web.Response(status=204)
        if self.ice_link is not None:
            response.headers.add("Link", self.ice_link)
        return response

    async def _post(self, request: web.Request) -> web.Response:
        if not self._log(request) or self.mode == "refuse":
            return web.Response(status=401, text="bad token")
        if self.mode == "busy" and self.busy_for > 0:
            self.busy_for -= 1
            return web.Response(status=503, text="busy", headers={"Retry-After": "1"})
        pc = create_peer_connection(IceConfig.loopback_only())
        pushed = Pushed(pc)

        @pc.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            self._tasks.append(asyncio.ensure_future(self._consume(track, pushed)))

        await pc.setRemoteDescription(RTCSessionDescription(sdp=await request.text(), type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
        answer = pc.localDescription.sdp
        if self.mode == "silent":
            await pc.close()
        key = secrets.token_hex(6)
        self.resources[key] = pushed
        return web.Response(
            status=201, text=answer, content_type="application/sdp", headers={"Location": f"/resource/{key}"}
        )

    async def _consume(self, track: MediaStreamTrack, into: Pushed) -> None:
        with contextlib.suppress(MediaStreamError, asyncio.CancelledError):
            while True:
                frame = await track.recv()
                if track.kind == "video":
                    fid = read_id(frame)  # type: ignore[arg-type]
                    if fid is not None:
                        into.video_ids.append(fid)
                        into.last_video = frame.to_ndarray(format="rgb24")  # type: ignore[union-attr]
                else:
                    into.audio_frames += 1

    async def _delete(self, request: web.Request) -> web.Response:
        if not self._log(request):
            return web.Response(status=401, text="bad token")
        pushed = self.resources.get(request.match_info["key"])
        if pushed is None:
            return web.Response(status=404, text="no such resource")
        pushed.deleted = True
        await pushed.pc.close()
        return web.Response(status=200)

    async def _close(self, app: web.Application) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for pushed in self.resources.values():
            await pushed.pc.close()


@contextlib.asynccontextmanager
async def running_endpoint(endpoint: WhipEndpoint) -> AsyncIterator[str]:
    runner = web.AppRunner(endpoint.app())
    await runner.setup()
    port = await start_site(runner)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
