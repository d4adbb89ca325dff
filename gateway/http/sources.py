"""POST /sources: upload a source face image (jpeg/png/webp) -> 201 {"id", "faces"}.

An upload is checked before it costs anything: its declared size is read from the header and refused over
`SourcesConfig.max_pixels` (413, the limit in the message); decoding and shrinking run in a child process
(gateway.image_decode), face detection and trimming in a worker thread (never on the event loop), and every
decoder error is a 4xx. What is kept is bounded by
gateway.source_store.
"""

from __future__ import annotations

import asyncio
import secrets
from concurrent.futures.process import BrokenProcessPool

import numpy as np
from aiohttp import web

from engines.frames import NoFaceFound, SourceFace
from gateway.errors import (
    BadRequest,
    NotFound,
    PayloadTooLarge,
    Unavailable,
    Unprocessable,
    UnsupportedMediaType,
)
from gateway.http.keys import CONFIG, STATE, pipeline_of, principal_of
from gateway.http.request_checks import check_image_size, read_image_body
from gateway.image_decode import decode_for_source
from gateway.source_store import SourcesConfig, prepare_bounded


async def add_source(
    app: web.Application, image_rgb: np.ndarray, source_id: str | None = None, *, owner: str | None = None
) -> SourceFace:
    pipeline = pipeline_of(app)
    sid = source_id or secrets.token_urlsafe(9)
    config: SourcesConfig = app[CONFIG].sources
    try:
        face = await asyncio.get_running_loop().run_in_executor(
            app[STATE].background.executor, prepare_bounded, pipeline.prepare_source, image_rgb, sid, config
        )
    except NoFaceFound:
        raise Unprocessable("no face found in the image") from None
    app[STATE].sources.put(face, owner, pinned=source_id == "default")
    return face


async def _decode_and_add(request: web.Request, body: bytes, owner: str | None) -> SourceFace:
    config = request.app[CONFIG]
    check_image_size(body, config.sources.max_pixels)  # cheap: before any thread or memory is spent
    background = request.app[STATE].background
    with background.admit():  # live video first: uploads run on a small, lower-priority pool
        try:
            kind, value = await asyncio.get_running_loop().run_in_executor(
                background.processes,
                decode_for_source,
                body,
                config.sources.max_pixels,
                config.sources.max_side,
            )
        except BrokenProcessPool:  # the child died (killed, out of memory): the next upload gets a new one
            background.restart_processes()
            raise Unavailable("image decoder restarting", retry_after_s=1) from None
        if kind != "ok":
            raise {"too_large": PayloadTooLarge, "empty": Unprocessable}.get(kind, UnsupportedMediaType)(
                value
            )
        return await add_source(request.app, value, owner=owner)


async def post_source(request: web.Request) -> web.Response:
    config = request.app[CONFIG]
    body = await read_image_body(request, config.max_body_bytes, config.body_timeout_s)
    face = await _decode_and_add(request, body, principal_of(request).tenant)
    return web.json_response(
        {"id": face.id, "faces": face.faces}, status=201, headers={"Location": f"/sources/{face.id}"}
    )


def _visible(request: web.Request, sid: str) -> bool:
    state = request.app[STATE]
    return sid == state.default_source_id or principal_of(request).owns(state.sources.owner(sid))


def visible_source(request: web.Request, sid: str) -> SourceFace | None:
    """The source (marked as just used) when the caller may use it: the default one, its own, or any for an
    admin. None otherwise: another tenant's source is as unknown as a missing one."""
    face = request.app[STATE].sources.get(sid)
    return face if face is not None and _visible(request, sid) else None


async def get_source(request: web.Request) -> web.Response:
    face = visible_source(request, request.match_info["source_id"])
    if face is None:
        raise NotFound("no such source")
    return web.json_response({"id": face.id, "faces": face.faces})


async def delete_source(request: web.Request) -> web.Response:
    state = request.app[STATE]
    sid = request.match_info["source_id"]
    if sid == state.default_source_id:
        raise BadRequest("the default source cannot be deleted")
    if sid not in state.sources or not _visible(request, sid) or state.sources.pop(sid) is None:
        raise NotFound("no such source")
    return web.Response(status=204)


def add_routes(app: web.Application) -> None:
    app.router.add_post("/sources", post_source)
    app.router.add_get("/sources/{source_id}", get_source)
    app.router.add_delete("/sources/{source_id}", delete_source)
