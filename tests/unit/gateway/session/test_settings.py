"""The per-session settings' one parser (gateway.session.settings): a WHIP query and a PATCH body give the
same settings and the same one-line 4xx, spelled as each caller writes its keys; the option defaults go
through it too."""

from __future__ import annotations

import numpy as np
import pytest

from engines.frames import FaceSettings, SourceFace
from engines.pipeline_config import PipelineConfig
from gateway.errors import BadRequest, GatewayError, NotFound, Unprocessable
from gateway.session.settings import (
    Lookups,
    SessionSettings,
    default_faces,
    default_selector,
    face_shape,
    in_query,
    parse,
    processor_names,
    query_values,
)

A = SourceFace(id="a", image=np.zeros((2, 2, 3), np.uint8), faces=1)
B = SourceFace(id="b", image=np.zeros((2, 2, 3), np.uint8), faces=1)
DEFAULTS = FaceSettings(keep_regions=("mouth", "eyes"), selector="many")
START = SessionSettings(None, ("face_swapper",), None)


def lookups(reference: bool = True, spell: bool = False) -> Lookups:
    return Lookups(DEFAULTS, {"a": A, "b": B}.get, reference, in_query if spell else str)


def from_query(
    query: dict[str, str], default_source: str | None = None, reference: bool = True
) -> SessionSettings:
    return parse(query_values(query, default_source), START, lookups(reference, spell=True))


def test_a_query_and_a_body_give_the_same_settings() -> None:
    query = {"source": "a", "processors": "face_swapper,face_enhancer", "mask": "mouth", "faces": "one"}
    body = {"source": "a", "processors": ["face_swapper", "face_enhancer"], "mask": ["mouth"], "faces": "one"}
    by_query, by_body = (
        from_query({**query, "shape": "0.25"}),
        parse({**body, "shape": 0.25}, START, lookups()),
    )
    assert by_query.faces is not None and by_body.faces is not None
    assert (by_query.source, by_query.processors) == (by_body.source, by_body.processors)
    assert vars(by_query.faces) == vars(by_body.faces)
    assert by_query.source is A and by_query.processors == ("face_swapper", "face_enhancer")
    assert by_query.faces is not None
    assert (by_query.faces.keep_regions, by_query.faces.selector, by_query.faces.shape) == (
        ("mouth",),
        "one",
        0.25,
    )


def test_nothing_given_keeps_the_defaults_and_none_means_empty() -> None:
    assert from_query({}) == START  # face settings stay None: the gateway's defaults apply
    assert from_query({"source": "", "processors": " "}, default_source="b") == SessionSettings(
        B, ("face_swapper",), None
    )
    passing = from_query({"processors": "none", "mask": "none"})
    assert passing.processors == () and passing.faces is not None and passing.faces.keep_regions == ()
    assert parse({"processors": ""}, START, lookups()).processors == ()  # in JSON "" is a value: none


def test_face_settings_start_from_the_session_then_the_defaults() -> None:
    one = parse({"faces": "one"}, START, lookups())
    assert one.faces is not None and one.faces.keep_regions == DEFAULTS.keep_regions
    shaped = parse({"shape": 0}, one, lookups())
    assert shaped.faces is not None and (shaped.faces.selector, shaped.faces.shape) == ("one", 0.0)
    ref = parse({"faces": "reference", "reference": "b"}, START, lookups())
    assert ref.faces is not None and ref.faces.reference is B
    moved = parse({"reference": "a"}, ref, lookups())  # already on reference: the face alone may change
    assert moved.faces is not None and moved.faces.reference is A


def test_a_query_reference_counts_only_with_faces_reference() -> None:
    assert from_query({"reference": "a"}) == START
    with pytest.raises(BadRequest, match="reference is used with faces=reference only"):
        parse({"reference": "a"}, START, lookups())


@pytest.mark.parametrize(
    ("query", "body", "error", "text"),
    [
        (
            {"processors": "face_melter"},
            {"processors": ["face_melter"]},
            BadRequest,
            "unknown processor(s) face_melter",
        ),
        ({"mask": "nose"}, {"mask": "mouth,nose"}, BadRequest, "unknown mask region(s) nose (known: mouth,"),
        ({"faces": "all"}, {"faces": "all"}, BadRequest, "faces=all (known: many, one, reference)"),
        ({"faces": "reference"}, {"faces": "reference"}, BadRequest, "reference=<source id>"),
        (
            {"faces": "reference", "reference": "zzz"},
            {"faces": "reference", "reference": "zzz"},
            NotFound,
            "'zzz'",
        ),
        ({"source": "zzz"}, {"source": "zzz"}, NotFound, "no source 'zzz'"),
        ({"shape": "2"}, {"shape": 2}, BadRequest, "shape must be a number in 0..1"),
        ({"shape": "abc"}, {"shape": "abc"}, BadRequest, "shape must be a number in 0..1"),
        ({"shape": "nan"}, {"shape": None}, BadRequest, "shape must be a number in 0..1"),
    ],
)
def test_the_same_mistake_gets_the_same_answer_from_both(
    query: dict[str, str], body: dict[str, object], error: type[GatewayError], text: str
) -> None:
    with pytest.raises(error) as by_query:
        from_query(query)
    with pytest.raises(error) as by_body:
        parse(body, START, lookups())
    for raised in (by_query.value, by_body.value):
        assert text in str(raised) and "\n" not in str(raised), raised


def test_reference_without_the_embedder_is_422_in_the_callers_spelling() -> None:
    with pytest.raises(Unprocessable, match=r"^\?faces=reference needs the ArcFace embedder"):
        from_query({"faces": "reference", "reference": "a"}, reference=False)
    with pytest.raises(Unprocessable, match="^faces=reference needs the ArcFace embedder"):
        parse({"faces": "reference", "reference": "a"}, START, lookups(reference=False))


@pytest.mark.parametrize(
    "body", [{"processors": 5}, {"mask": [1]}, {"source": 3}, {"source": ""}, {"shape": True}]
)
def test_json_of_the_wrong_type_is_a_400(body: dict[str, object]) -> None:
    with pytest.raises(BadRequest):
        parse(body, START, lookups())


def test_the_option_defaults_go_through_the_same_checks() -> None:
    flags = {"processors": "--processors", "faces": "--face-selector", "shape": "--face-shape"}.__getitem__
    assert processor_names(("face_swapper", "none"), flags) == ("face_swapper",)
    assert default_selector("one", flags) == "one" and face_shape(0.5, flags) == 0.5
    with pytest.raises(BadRequest, match=r"--face-selector must be many or one.*\?faces=reference"):
        default_selector("reference", flags)
    with pytest.raises(BadRequest, match="unknown processor"):
        processor_names(("face_melter",), flags)
    config = PipelineConfig(keep_regions=("eyes",), face_selector="one", shape=0.5)
    assert (default_faces(config).keep_regions, default_faces(config).selector) == (("eyes",), "one")
