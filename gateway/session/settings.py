"""The six settings a session is given: its source face, processors, the target regions kept (mask), the faces
swapped, the reference face and the face shape. One parser reads them wherever they are written (a WHIP
query, a PATCH body, the gateway's options for the defaults), with the same checks and the same one-line
errors (gateway.errors: 400, 404 for an unknown source, 422 without the ArcFace embedder). It is pure: the
caller passes how a source id is looked up, whether the embedder is loaded, and how it spells a key
(`?faces` in a query, `faces` in JSON, `--face-selector` on the command line)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from engines.frames import FACE_SELECTORS, MASK_REGIONS, PROCESSORS, FaceSettings, SourceFace, check_shape
from engines.pipeline_config import PipelineConfig
from gateway.errors import BadRequest, NotFound, Unprocessable

KEYS = ("source", "processors", "mask", "faces", "reference", "shape")
FACE_KEYS = frozenset({"mask", "faces", "reference", "shape"})

Spell = Callable[[str], str]


def as_written(key: str) -> str:
    """A JSON body's spelling: the key itself."""
    return key


def in_query(key: str) -> str:
    return f"?{key}"


@dataclass(frozen=True)
class SessionSettings:
    source: SourceFace | None
    processors: tuple[str, ...]
    faces: FaceSettings | None  # None: the gateway's defaults (`default_faces`)


@dataclass(frozen=True)
class Lookups:
    """What the parser asks of the gateway: the face defaults, a source by id (None: unknown, or another
    tenant's), whether `faces=reference` can work, and how the caller spells a key."""

    defaults: FaceSettings
    find_source: Callable[[str], SourceFace | None]
    supports_reference: bool
    spell: Spell = as_written


def default_faces(config: PipelineConfig) -> FaceSettings:
    """The face settings of a session that asks for none: the gateway's options."""
    return FaceSettings(config.keep_regions, config.face_selector, shape=config.shape)


def parse(values: Mapping[str, object], current: SessionSettings, lookups: Lookups) -> SessionSettings:
    """`current` with the settings in `values` (keys of KEYS; absent = unchanged), every value checked
    first; a 4xx otherwise. Face settings start from the session's own, else the defaults; a session that
    never gave one keeps None (it follows the defaults)."""
    spell = lookups.spell
    source = current.source
    if "source" in values:
        source = source_of(values["source"], "source", lookups)
    processors = current.processors
    if "processors" in values:
        processors = processor_names(values["processors"], spell)
    if not FACE_KEYS & set(values):
        return SessionSettings(source, processors, current.faces)
    base = current.faces or lookups.defaults
    keep = base.keep_regions
    if "mask" in values:
        keep = mask_regions(values["mask"], spell)
    selector = face_selector(values["faces"], spell) if "faces" in values else base.selector
    reference = None
    if selector == "reference":
        if not lookups.supports_reference:
            raise Unprocessable(
                f"{spell('faces')}=reference needs the ArcFace embedder (arcface_w600k_r50), which is not "
                "installed here: see `python -m engines.models list`"
            )
        if "reference" in values:
            reference = source_of(values["reference"], "reference", lookups)
        else:
            reference = base.reference
        if reference is None:
            raise BadRequest(
                f"{spell('faces')}=reference needs {spell('reference')}=<source id> "
                "(upload it with POST /sources)"
            )
    elif "reference" in values:
        raise BadRequest(f"{spell('reference')} is used with {spell('faces')}=reference only")
    shape = face_shape(values["shape"], spell) if "shape" in values else base.shape
    return SessionSettings(source, processors, FaceSettings(keep, selector, reference, shape))


def processor_names(value: object, spell: Spell = as_written) -> tuple[str, ...]:
    """Processors in the order given; none = pass-through."""
    return names(value, "processors", PROCESSORS, "processor(s)", spell)


def mask_regions(value: object, spell: Spell = as_written) -> tuple[str, ...]:
    """The target regions kept from the frame; none = the whole face is swapped."""
    return names(value, "mask", MASK_REGIONS, "mask region(s)", spell)


def names(value: object, key: str, known: tuple[str, ...], noun: str, spell: Spell) -> tuple[str, ...]:
    """A list of names or "a,b": known names only; `none` (or nothing) = the empty list."""
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        items = [v.strip() for v in value]
    else:
        raise BadRequest(f"{spell(key)} must be a list of names or a comma-separated string")
    chosen = tuple(n for n in items if n and n.lower() != "none")
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise BadRequest(f"unknown {noun} {', '.join(unknown)} (known: {', '.join((*known, 'none'))})")
    return chosen


def face_selector(value: object, spell: Spell = as_written) -> str:
    if not isinstance(value, str) or value not in FACE_SELECTORS:
        raise BadRequest(f"unknown {spell('faces')}={value} (known: {', '.join(FACE_SELECTORS)})")
    return value


def default_selector(value: object, spell: Spell = as_written) -> str:
    """The gateway's default selector: many or one (a reference face is chosen per session)."""
    selector = face_selector(value, spell)
    if selector == "reference":
        raise BadRequest(
            f"{spell('faces')} must be many or one, got 'reference' (reference is per session: "
            "?faces=reference&reference=<source id>)"
        )
    return selector


def face_shape(value: object, spell: Spell = as_written) -> float:
    """A number in 0..1 (a query's text is made a number by `query_values`)."""
    try:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("not a number")
        return check_shape(value)
    except ValueError:
        raise BadRequest(
            f"{spell('shape')} must be a number in 0..1 (the source's face shape), got {value!r}"
        ) from None


def source_of(value: object, key: str, lookups: Lookups) -> SourceFace | None:
    """A source id, visible to the caller; None (JSON null) = none."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{lookups.spell(key)} must be a source id (or null)")
    face = lookups.find_source(value)
    if face is None:
        raise NotFound(f"no source {value!r} for {lookups.spell(key)} (upload one with POST /sources)")
    return face


def query_values(query: Mapping[str, str], default_source: str | None) -> dict[str, object]:
    """A WHIP query as the parser's values. In a query an empty ?source= or ?processors= means "not given"
    (the gateway's default source and processors), ?reference= counts only with ?faces=reference, and
    ?shape= is text: a number where it reads as one."""
    values: dict[str, object] = {}
    source = query.get("source") or default_source
    if source is not None:
        values["source"] = source
    if query.get("processors", "").strip():
        values["processors"] = query["processors"]
    for key in ("mask", "faces"):
        if key in query:
            values[key] = query[key]
    if query.get("faces") == "reference" and query.get("reference"):
        values["reference"] = query["reference"]
    if "shape" in query:
        values["shape"] = _number(query["shape"])
    return values


def _number(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text
