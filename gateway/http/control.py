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

from engines.frames import FACE_SELECTORS, MASK_REGIONS, PROCESSORS, FaceSettings, SourceFace, check_shape
from gateway.errors import BadRequest, NotFound, Unprocessable
from gateway.http.body import read_json_object
from gateway.http.keys import CONFIG, MONITOR, STATE
from gateway.http.sources import visible_source
from gateway.http.whip import owned_session
from gateway.marking.config import check_label

KEYS = ("source", "processors", "mask", "faces", "reference", "shape", "label")


@dataclass(frozen=True)
class Control:
    source: SourceFace | None
    processors: tuple[str, ...]
    face_settings: FaceSettings | None  # None: the gateway's defaults
    label: str | None = None  # the visible disclosure label (gateway.marking.label)


def _names(value: Any, key: str, known: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = [v.strip() for v in value]
    else:
        raise BadRequest(f"{key} must be a list of names or a comma-separated string")
    names = tuple(n for n in items if n and n.lower() != "none")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise BadRequest(f"unknown {key} {', '.join(unknown)} (known: {', '.join((*known, 'none'))})")
    return names


def _source(value: Any, key: str, find: Callable[[str], SourceFace | None]) -> SourceFace | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{key} must be a source id (or null)")
    face = find(value)
    if face is None:
        raise NotFound(f"no source {value!r} for {key} (upload one with POST /sources)")
    return face


def plan(
    body: Mapping[str, Any],
    current: Control,
    defaults: FaceSettings,
    find_source: Callable[[str], SourceFace | None],
    supports_reference: bool,
) -> Control:
    """The session's settings after `body`, or a 4xx (BadRequest, NotFound, Unprocessable)."""
    unknown = sorted(set(body) - set(KEYS))
    if unknown:
        raise BadRequest(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
    if not body:
        raise BadRequest(f"nothing to change (keys: {', '.join(KEYS)})")
    source = _source(body["source"], "source", find_source) if "source" in body else current.source
    processors = (
        _names(body["processors"], "processors", PROCESSORS) if "processors" in body else current.processors
    )
    settings = current.face_settings
    label = _label(body["label"]) if "label" in body else current.label
    if not {"mask", "faces", "reference", "shape"} & set(body):
        return Control(source, processors, settings, label)
    base = settings or defaults
    keep = _names(body["mask"], "mask", MASK_REGIONS) if "mask" in body else base.keep_regions
    selector = body.get("faces", base.selector)
    if selector not in FACE_SELECTORS:
        raise BadRequest(f"unknown faces {selector!r} (known: {', '.join(FACE_SELECTORS)})")
    reference = None
    if selector == "reference":
        if not supports_reference:
            raise Unprocessable(
                "faces=reference needs the ArcFace embedder (arcface_w600k_r50), which is not installed "
                "here: see `python -m engines.models list`"
            )
        if "reference" in body:
            reference = _source(body["reference"], "reference", find_source)
        else:
            reference = base.reference
        if reference is None:
            raise BadRequest("faces=reference needs reference=<source id> (upload it with POST /sources)")
    elif "reference" in body:
        raise BadRequest("reference is used with faces=reference only")
    shape = _shape(body["shape"]) if "shape" in body else base.shape
    face_settings = FaceSettings(keep_regions=keep, selector=selector, reference=reference, shape=shape)
    return Control(source, processors, face_settings, label)


def _label(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"label must be text or null, got {value!r}")
    try:
        return check_label(value)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def _shape(value: Any) -> float:
    try:
        return check_shape(value)
    except ValueError:
        raise BadRequest(f"shape must be a number in 0..1 (the source's face shape), got {value!r}") from None


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
    defaults = FaceSettings(
        config.processing.mask_regions, config.processing.face_selector, shape=config.processing.face_shape
    )
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
