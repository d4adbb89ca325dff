"""Live control's plan (gateway.http.control.plan): absent keys keep their value, every value is checked
before anything changes, and face settings start from the session's own or the gateway's defaults."""

from __future__ import annotations

import numpy as np
import pytest

from engines.frames import FaceSettings, SourceFace
from gateway.errors import BadRequest, NotFound, Unprocessable
from gateway.http.control import Control, describe, plan

A = SourceFace(id="a", image=np.zeros((2, 2, 3), np.uint8), faces=1)
B = SourceFace(id="b", image=np.zeros((2, 2, 3), np.uint8), faces=1)
DEFAULTS = FaceSettings(keep_regions=("mouth", "eyes"), selector="many")
CURRENT = Control(A, ("face_swapper",), None)


def find(sid: str) -> SourceFace | None:
    return {"a": A, "b": B}.get(sid)


def test_only_the_keys_given_change() -> None:
    new = plan({"source": "b"}, CURRENT, DEFAULTS, find, False)
    assert new.source is B and new.processors == ("face_swapper",) and new.face_settings is None
    new = plan({"processors": "none"}, CURRENT, DEFAULTS, find, False)
    assert new.processors == () and new.source is A
    both = {"source": None, "processors": ["face_swapper", "face_enhancer"]}
    new = plan(both, CURRENT, DEFAULTS, find, False)
    assert new.source is None and new.processors == ("face_swapper", "face_enhancer")


def test_face_settings_start_from_the_defaults_then_from_the_session() -> None:
    new = plan({"faces": "one"}, CURRENT, DEFAULTS, find, False)
    assert new.face_settings is not None
    assert (new.face_settings.keep_regions, new.face_settings.selector) == (("mouth", "eyes"), "one")
    newer = plan({"mask": []}, new, DEFAULTS, find, False)
    assert newer.face_settings is not None
    assert (newer.face_settings.keep_regions, newer.face_settings.selector) == ((), "one")
    assert describe(newer, DEFAULTS) == {
        "source": "a",
        "processors": ["face_swapper"],
        "mask": [],
        "faces": "one",
        "reference": None,
        "shape": 1.0,
        "label": None,
    }
    ref = plan({"faces": "reference", "reference": "b"}, CURRENT, DEFAULTS, find, True)
    assert ref.face_settings is not None and ref.face_settings.reference is B


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({}, BadRequest),
        ({"colour": "red"}, BadRequest),
        ({"source": 3}, BadRequest),
        ({"source": "zzz"}, NotFound),
        ({"processors": ["nope"]}, BadRequest),
        ({"processors": 5}, BadRequest),
        ({"mask": ["nose"]}, BadRequest),
        ({"faces": "all"}, BadRequest),
        ({"faces": "reference", "reference": "a"}, Unprocessable),  # no ArcFace embedder
        ({"reference": "a"}, BadRequest),
        ({"shape": 1.5}, BadRequest),
        ({"shape": -0.1}, BadRequest),
        ({"shape": "0.5"}, BadRequest),
        ({"shape": True}, BadRequest),
        ({"shape": None}, BadRequest),
    ],
)
def test_bad_values_are_refused(body: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        plan(body, CURRENT, DEFAULTS, find, False)


def test_reference_needs_a_reference_face() -> None:
    with pytest.raises(BadRequest):
        plan({"faces": "reference"}, CURRENT, DEFAULTS, find, True)
    with pytest.raises(NotFound):
        plan({"faces": "reference", "reference": "zzz"}, CURRENT, DEFAULTS, find, True)


def test_shape_changes_alone_and_keeps_the_other_settings() -> None:
    new = plan({"faces": "one"}, CURRENT, DEFAULTS, find, False)
    shaped = plan({"shape": 0.25}, new, DEFAULTS, find, False)
    assert shaped.face_settings is not None
    assert (shaped.face_settings.shape, shaped.face_settings.selector) == (0.25, "one")
    assert describe(shaped, DEFAULTS)["shape"] == 0.25
    zero = plan({"shape": 0}, CURRENT, DEFAULTS, find, False)
    assert zero.face_settings is not None and zero.face_settings.shape == 0.0


def test_the_label_is_set_cleared_and_checked_by_patch() -> None:
    labelled = plan({"label": "AI-generated"}, CURRENT, DEFAULTS, find, supports_reference=False)
    assert labelled.label == "AI-generated" and labelled.source is CURRENT.source
    assert plan({"shape": 0.5}, labelled, DEFAULTS, find, supports_reference=False).label == "AI-generated"
    assert plan({"label": None}, labelled, DEFAULTS, find, supports_reference=False).label is None
    for bad in (5, "x" * 65, "two\nlines"):
        with pytest.raises(BadRequest):
            plan({"label": bad}, CURRENT, DEFAULTS, find, supports_reference=False)
