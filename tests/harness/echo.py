"""A minimal WHIP server that sends every received frame straight back (aiortc, loopback-only ICE): the
load generator's client, its stamps through two VP8 hops, its accounting and its CLI, tested without the
gateway."""

from __future__ import annotations

import asyncio
import uuid

from aiohttp import web
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription

from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig


def echo_app(pcs: dict[str, RTCPeerConnection], counters: dict[str, int]) -> web.Application:
    async def whip(request: web.Request) -> web.Response:
        if request.headers.get("Content-Type") != "application/sdp":
            return web.Response(status=415)
        if request.query.get("source") != "src1":
            return web.Response(status=404, text="no such source")
        pc = create_peer_connection(IceConfig.loopback_only())
        sid = uuid.uuid4().hex

        @pc.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            pc.addTrack(track)  # echo: the received (decoded) frames are re-encoded and sent back

        await pc.setRemoteDescription(RTCSessionDescription(sdp=await request.text(), type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
        pcs[sid] = pc
        counters["joined"] += 1
        return web.Response(
            status=201,
            text=pc.localDescription.sdp,
            content_type="application/sdp",
            headers={"Location": f"/whip/{sid}"},
        )

    async def delete(request: web.Request) -> web.Response:
        pc = pcs.pop(request.match_info["sid"], None)
        if pc is None:
            return web.Response(status=404)
        counters["deleted"] += 1
        await pc.close()
        return web.Response(status=200)

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "schema_version": 1,
                "system": {"cpu_percent": 12.5},
                "frames": {"received": 10, "processed": 10, "fps_in": 15.0, "fps_out": 15.0},
                "sessions": {"open": len(pcs)},
            }
        )

    async def source(request: web.Request) -> web.Response:
        body = await request.read()
        if request.content_type != "image/png" or not body.startswith(b"\x89PNG"):
            return web.Response(status=415)
        counters["sources"] += 1
        return web.json_response({"id": "src1", "faces": 1}, status=201)

    async def ready(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def on_shutdown(app: web.Application) -> None:
        await asyncio.gather(*(pc.close() for pc in pcs.values()))

    app = web.Application()
    app.router.add_post("/whip", whip)
    app.router.add_delete("/whip/{sid}", delete)
    app.router.add_get("/api/stats", stats)
    app.router.add_post("/sources", source)
    app.router.add_get("/readyz", ready)
    app.on_shutdown.append(on_shutdown)
    return app
