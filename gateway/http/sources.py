"""POST /sources: upload a source face image (jpeg/png/webp) -> 201 {"id", "faces"}."""

from __future__ import annotations

import asyncio
import secrets

import cv2
import numpy as np
from aiohttp import web

from engines.frames import NoFaceFound, SourceFace
from gateway.errors import BadRequest, NotFound, PayloadTooLarge, Unprocessable, UnsupportedMediaType
from gateway.http.keys import CONFIG, STATE, pipeline_of

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/webp"})


def decode_image(body: bytes) -> np.ndarray:
    """Bytes -> HxWx3 RGB, or UnsupportedMediaType when they are not a decodable image."""
    bgr = cv2.imdecode(np.frombuffer(body, dtype=np.uint8), cv2.IMREAD_COLOR) if body else None
    if bgr is None:
        raise UnsupportedMediaType("body is not a decodable jpeg/png/webp image")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


async def add_source(app: web.Application, image_rgb: np.ndarray, source_id: str | None = None) -> SourceFace:
    pipeline = pipeline_of(app)
    sid = source_id or secrets.token_urlsafe(9)
    try:
        face = await asyncio.get_running_loop().run_in_executor(None, pipeline.prepare_source, image_rgb, sid)
    except NoFaceFound:
        raise Unprocessable("no face found in the image") from None
    app[STATE].sources[face.id] = face
    return face


async def post_source(request: web.Request) -> web.Response:
    if request.content_type not in IMAGE_TYPES:
        raise UnsupportedMediaType(f"Content-Type must be one of {', '.join(sorted(IMAGE_TYPES))}")
    limit = request.app[CONFIG].max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(f"image larger than {limit} bytes")
    body = await request.read()
    face = await add_source(request.app, decode_image(body))
    return web.json_response(
        {"id": face.id, "faces": face.faces}, status=201, headers={"Location": f"/sources/{face.id}"}
    )


async def get_source(request: web.Request) -> web.Response:
    face = request.app[STATE].sources.get(request.match_info["source_id"])
    if face is None:
        raise NotFound("no such source")
    return web.json_response({"id": face.id, "faces": face.faces})


async def delete_source(request: web.Request) -> web.Response:
    state = request.app[STATE]
    sid = request.match_info["source_id"]
    if sid == state.default_source_id:
        raise BadRequest("the default source cannot be deleted")
    if state.sources.pop(sid, None) is None:
        raise NotFound("no such source")
    return web.Response(status=204)


def add_routes(app: web.Application) -> None:
    app.router.add_post("/sources", post_source)
    app.router.add_get("/sources/{source_id}", get_source)
    app.router.add_delete("/sources/{source_id}", delete_source)
