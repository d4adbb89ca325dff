"""Live control: `PATCH /sessions/{id}` with JSON changes a running session's source face, processors, kept
regions, face selector and face shape, without reconnecting (owner or admin only; anyone else gets 404).

Keys (each optional; absent = unchanged): `source` (a source id, or null: no swap), `processors` (a list or
"a,b"; [] or "none" = pass-through), `mask` (regions kept from the target, list or "a,b"; [] or "none"),
`faces` (many | one | reference), `reference` (a source id, with faces=reference) and `shape` (how much of
the source's face shape, a number 0..1) and `label` (the visible disclosure label: text, or null for
none). Every value is checked
first (`plan`, pure) and applied together, or nothing changes; the next frame the session receives is
processed with them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from engines.frames import FaceSettings, SourceFace
from gateway.errors import BadRequest
from gateway.http.body import read_json_object
from gateway.http.keys import CONFIG, MONITOR, STATE
from gateway.http.sources import visible_source
from gateway.http.whip import owned_session
from gateway.marking.config import check_label
from gateway.session.settings import KEYS as SETTINGS_KEYS
from gateway.session.settings import Lookups, SessionSettings, default_faces, parse

KEYS = (*SETTINGS_KEYS, "label")


@dataclass(frozen=True)
class Control:
    source: SourceFace | None
    processors: tuple[str, ...]
    face_settings: FaceSettings | None  # None: the gateway's defaults
    label: str | None = None  # the visible disclosure label (gateway.marking.label)


def plan(
    body: Mapping[str, Any],
    current: Control,
    defaults: FaceSettings,
    find_source: Callable[[str], SourceFace | None],
    supports_reference: bool,
) -> Control:
    """The session's settings after `body`, or a 4xx (BadRequest, NotFound, Unprocessable): the six
    per-session settings by the sessions' one parser (gateway.session.settings), the label here."""
    unknown = sorted(set(body) - set(KEYS))
    if unknown:
        raise BadRequest(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
    if not body:
        raise BadRequest(f"nothing to change (keys: {', '.join(KEYS)})")
    settings = parse(
        {k: v for k, v in body.items() if k != "label"},
        SessionSettings(current.source, current.processors, current.face_settings),
        Lookups(defaults, find_source, supports_reference),
    )
    label = _label(body["label"]) if "label" in body else current.label
    return Control(settings.source, settings.processors, settings.faces, label)


def _label(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"label must be text or null, got {value!r}")
    try:
        return check_label(value)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def describe(control: Control, defaults: FaceSettings) -> dict[str, Any]:
    settings = control.face_settings or defaults
    return {
        "source": control.source.id if control.source is not None else None,
        "processors": list(control.processors),
        "mask": list(settings.keep_regions),
        "faces": settings.selector,
        "reference": settings.reference.id if settings.reference is not None else None,
        "shape": settings.shape,
        "label": control.label,
    }


async def patch_session(request: web.Request) -> web.Response:
    session = owned_session(request)
    config = request.app[CONFIG]
    body = await read_json_object(request, config.body_timeout_s)
    defaults = default_faces(config.pipeline)
    pipeline = request.app[STATE].pipeline
    new = plan(
        body,
        Control(session.source, session.processors, session.face_settings, session.label),
        defaults,
        lambda sid: visible_source(request, sid),
        bool(getattr(pipeline, "supports_reference", False)),
    )
    session.reconfigure(new.source, new.processors, new.face_settings)
    session.label = new.label
    state = describe(new, defaults)
    changed = ", ".join(sorted(body))
    request.app[MONITOR].event(
        "session_control", f"session {session.id} changed: {changed}", session_id=session.id, **state
    )
    return web.json_response(state)


def add_routes(app: web.Application) -> None:
    app.router.add_patch("/sessions/{session_id}", patch_session)
