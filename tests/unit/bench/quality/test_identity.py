"""The quality report's identity and liveliness measures on real faces: dlib's embedder tells two photos of
one person from another person, openness and appearance follow real mouths and eyes, and the default kept eyes
hand less identity back to the target than the whole eye area while the eyes stay the target's."""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from bench.quality.identity import (
    FaceRecognizer,
    IdentityUnavailable,
    appearance,
    centred_cosine,
    correlation,
    openness,
)
from bench.quality.identity_section import verdict
from bench.quality.report import HELD_OUT
from engines.frames import KEPT_REGIONS, FaceSettings, FaceTrack, FrameItem, SourceFace
from engines.pipeline import Pipeline
from engines.processors.face_detector import Face
from engines.processors.masks import EYE_LEFT, EYE_RIGHT
from engines.processors.tracking import measured
from engines.source.expression import BROW_LEFT, BROW_RIGHT
from loadgen.contact_sheet import webcam_frame


@pytest.fixture(scope="module")
def recognizer() -> FaceRecognizer:
    return FaceRecognizer()


@pytest.fixture(scope="module")
def held_out(media: dict[str, Path], pipeline: Pipeline) -> dict[str, np.ndarray]:
    """The held-out photos as 640x360 webcam frames around their faces (as the quality report takes them)."""
    out = {}
    for name in HELD_OUT:
        bgr = cv2.imread(str(media[f"{name}.jpg"]), cv2.IMREAD_COLOR)
        assert bgr is not None
        rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        out[name] = webcam_frame(rgb, max(pipeline.detect([rgb])[0], key=lambda f: f.area).box)
    return out


def _mesh(pipeline: Pipeline, image: np.ndarray) -> Face:
    face = max(pipeline.detect([image])[0], key=lambda f: f.area)
    m = pipeline.landmarker.run([(image, face)])[0]
    return measured(face, m.landmarks, m.presence)


def test_embedder_tells_one_person_from_another(
    recognizer: FaceRecognizer,
    held_out: dict[str, np.ndarray],
    astronaut: np.ndarray,
    group_photo: np.ndarray,
    pipeline: Pipeline,
) -> None:
    a, a2, b = (recognizer.embed(held_out[n]) for n in ("obama", "obama2", "biden"))
    assert a is not None and a2 is not None and b is not None and a.shape == (128,)
    # dlib's own rule: the same person within 0.6
    assert np.linalg.norm(a - a2) < 0.6 < np.linalg.norm(a - b)
    others = [recognizer.embed(group_photo, f.box) for f in pipeline.detect([group_photo])[0]]
    people = [e for e in [*others, recognizer.embed(astronaut), a, b] if e is not None]
    assert len(people) >= 6
    mean = np.mean(people, axis=0)
    assert centred_cosine(a, a2, mean) > 0.6
    assert centred_cosine(a, b, mean) < 0.3
    assert recognizer.embed(np.full((240, 320, 3), 128, np.uint8)) is None


def test_missing_dlib_is_a_one_line_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dlib", None)
    with pytest.raises(IdentityUnavailable, match=r"pip install 'livefuse\[quality\]'"):
        FaceRecognizer()


def test_openness_and_appearance_follow_real_faces(
    pipeline: Pipeline, astronaut: np.ndarray, source: SourceFace
) -> None:
    """The astronaut smiles with her teeth showing and her eyes open; the source's mouth is closed. Painting
    the astronaut's eye openings with skin (a closed lid) takes the eyes' appearance away."""
    lm = _mesh(pipeline, astronaut).landmarks
    closed = source.prepared.face.landmarks
    assert lm is not None and closed is not None
    open_, shut = openness(lm), openness(closed)
    assert open_["mouth"] > 2 * shut["mouth"] and open_["eyes"] > 0.15
    assert 0.2 < open_["brows"] < 1.0  # the brows stand a fraction of the eyes' distance above them
    raised = lm.copy()
    raised[list(BROW_RIGHT) + list(BROW_LEFT), 1] -= 0.05 * np.ptp(lm[:, 1])
    assert openness(raised)["brows"] > open_["brows"] + 0.05 and openness(raised)["eyes"] == open_["eyes"]
    look = appearance(astronaut, lm)
    lidded = astronaut.copy()
    skin = astronaut[int(lm[205][1]), int(lm[205][0])]
    for ring in (EYE_RIGHT, EYE_LEFT):
        cv2.fillPoly(lidded, [np.round(lm[list(ring)]).astype(np.int32)], skin.tolist())
    assert appearance(lidded, lm)["eyes"] < 0.4 * look["eyes"]  # the ring's edge keeps a little lash


def test_correlation_and_verdict() -> None:
    assert correlation([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert correlation([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert correlation([1, 1, 1, 1], [1, 2, 3, 4]) is None  # a series that does not move
    cases = {
        "a -> b": {"mouth,eyes": {"margin": 0.3}},
        "a -> c": {"mouth,eyes": {"margin": 0.05}},
        "a -> d": {"mouth,eyes": {"error": "no face"}},
    }
    v = verdict(cases, "mouth,eyes")
    assert v["cases"] == 2 and v["failed"] == ["a -> c"] and v["min_margin"] == 0.05


@pytest.fixture(scope="module")
def source(pipeline: Pipeline, group_photo: np.ndarray) -> SourceFace:
    """The closed-mouth, eyes-cast-down face at the left of t1.jpg."""
    f = min(pipeline.detect([group_photo])[0], key=lambda f: f.box[0])
    x1, y1, x2, y2 = f.box.astype(int)
    crop = np.ascontiguousarray(group_photo[max(y1 - 60, 0) : y2 + 60, max(x1 - 60, 0) : x2 + 60])
    return pipeline.prepare_source(crop, "t1-left")


def test_default_eyes_stay_alive_and_hand_back_less_identity(
    pipeline: Pipeline,
    recognizer: FaceRecognizer,
    held_out: dict[str, np.ndarray],
    source: SourceFace,
    astronaut: np.ndarray,
    group_photo: np.ndarray,
) -> None:
    """The report's source on a held-out target: keeping the whole eye area (lids, lashes) hands the face back
    to the target, keeping only the eye openings (the default) much less; without kept eyes the openings show
    the source's warped, lowered eyes instead of the target's."""
    assert KEPT_REGIONS == ("mouth", "eyes") and FaceSettings().keep_regions == KEPT_REGIONS
    target = held_out["biden"]
    people = [recognizer.embed(group_photo, f.box) for f in pipeline.detect([group_photo])[0]]
    people += [recognizer.embed(astronaut), recognizer.embed(held_out["obama"]), recognizer.embed(target)]
    mean = np.mean([e for e in people if e is not None], axis=0)
    s_emb, t_emb = recognizer.embed(source.image), recognizer.embed(target)
    assert s_emb is not None and t_emb is not None
    lm = _mesh(pipeline, target).landmarks
    assert lm is not None
    openings = np.zeros(target.shape[:2], np.uint8)  # the target's eye openings, a pixel inside the lids
    cv2.fillPoly(openings, [np.round(lm[list(r)]).astype(np.int32) for r in (EYE_RIGHT, EYE_LEFT)], 255)
    eyes = cv2.erode(openings, np.ones((3, 3), np.uint8)) > 0
    assert eyes.sum() > 30
    margin, look = {}, {}
    for keep in ((), ("mouth", "eyes"), ("mouth", "eye_area")):
        # on the target's shape: the kept openings stay where the target's are (the source's shape moves them)
        track = FaceTrack(settings=FaceSettings(keep_regions=keep, selector="one", shape=0.0))
        out = pipeline.process([FrameItem(target, source, track=track, time_s=0.0)])[0]
        e = recognizer.embed(out.image, track.faces[0].shown.box)
        assert e is not None
        margin[keep] = centred_cosine(e, s_emb, mean) - centred_cosine(e, t_emb, mean)
        look[keep] = float(np.abs(out.image.astype(np.int16) - target.astype(np.int16))[eyes].mean())
    assert margin[("mouth", "eyes")] > 0.1 and margin[("mouth", "eye_area")] < margin[("mouth", "eyes")] - 0.2
    # the kept openings' rim blends into the source's lids (its feather), which this one-pixel ring grazes
    assert look[("mouth", "eyes")] < 12.0 and look[()] > 3 * look[("mouth", "eyes")]
