"""A source's strong highlight tamed at upload (engines.source.highlights), on a real face: a specular spot
painted on one cheek is cut while a faint sheen on the other stays, the rest of the picture is untouched, and
the fine detail under the spot stays."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engines.frames import SourceFace
from engines.pipeline import Pipeline
from engines.processors.masks import face_size_of
from engines.source.highlights import KNEE, tamed
from engines.source.validity import validity_map


@pytest.fixture(scope="module")
def face(pipeline: Pipeline, astronaut: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    source: SourceFace = pipeline.prepare_source(astronaut, "astronaut")
    lm = source.prepared.face.landmarks
    assert lm is not None
    pts = np.asarray(lm, dtype=np.float32)
    return pts, validity_map(astronaut, pts)


def _light(rgb: np.ndarray) -> np.ndarray:
    return np.asarray(cv2.cvtColor(rgb.astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB)[:, :, 0])


def test_a_specular_spot_is_cut_a_faint_sheen_stays_and_nothing_else_moves(
    astronaut: np.ndarray, face: tuple[np.ndarray, np.ndarray]
) -> None:
    pts, validity = face
    size = face_size_of(pts)
    base = tamed((astronaut.astype(np.float32) * 0.6).astype(np.uint8), pts, validity)  # room below L* 100
    ys, xs = np.mgrid[0 : base.shape[0], 0 : base.shape[1]]

    def bump(centre: np.ndarray) -> np.ndarray:  # 6 % of the face wide
        d2 = (xs - centre[0]) ** 2 + (ys - centre[1]) ** 2
        return np.exp(-d2 / (2 * (0.06 * size) ** 2)).astype(np.float32)

    # a spot 40 L* high on one cheek, a sheen of 6 (under the knee) on the other
    spot_at, sheen_at = (pts[50] + pts[205]) / 2, (pts[280] + pts[425]) / 2
    spot, sheen = bump(spot_at), bump(sheen_at)
    lab = cv2.cvtColor(base.astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB)
    lab[:, :, 0] = np.minimum(lab[:, :, 0] + 40.0 * spot + 0.6 * KNEE * sheen, 100.0)
    lit = np.clip(cv2.cvtColor(lab, cv2.COLOR_LAB2RGB) * 255.0 + 0.5, 0, 255).astype(np.uint8)

    out = tamed(lit, pts, validity)
    rise_in, rise_out = _light(lit) - _light(base), _light(out) - _light(base)
    peak = int(round(spot_at[1])), int(round(spot_at[0]))
    assert rise_in[peak] > 35
    assert KNEE < rise_out[peak] < 0.7 * rise_in[peak], (rise_in[peak], rise_out[peak])  # cut, not flattened
    # the sheen and everything away from the spot (and outside the valid face) are as they were
    far = spot < 1e-3
    assert np.abs(out.astype(int) - lit.astype(int))[far].max() <= 1
    assert (out[validity == 0] == lit[validity == 0]).all()
    # the fine detail under the spot stays (the cut is smooth)
    near = spot > 0.3
    hp_in = _light(lit) - cv2.GaussianBlur(_light(lit), (0, 0), 2.0)
    hp_out = _light(out) - cv2.GaussianBlur(_light(out), (0, 0), 2.0)
    assert np.corrcoef(hp_in[near], hp_out[near])[0, 1] > 0.75  # (a flattened spot: near 0)


def test_a_face_without_a_strong_highlight_is_left_as_it_is(
    astronaut: np.ndarray, face: tuple[np.ndarray, np.ndarray]
) -> None:
    pts, validity = face
    flat = cv2.GaussianBlur(astronaut, (0, 0), 0.02 * face_size_of(pts))
    dim = (flat.astype(np.float32) * 0.6).astype(np.uint8)  # a soft, dim face: nothing stands out
    assert tamed(dim, pts, validity) is dim


def test_a_white_spot_takes_the_skins_colour_back_not_a_grey_cast(
    astronaut: np.ndarray, face: tuple[np.ndarray, np.ndarray]
) -> None:
    """A specular spot is the light's colour added to the skin's: on warm skin a white light leaves a pale,
    grey patch. Cut in lightness only, that patch would stay grey (blue on a warm target); its colour goes
    back to the skin's around it, over the spot's tail too."""
    pts, validity = face
    size = face_size_of(pts)
    base = tamed((astronaut.astype(np.float32) * 0.6).astype(np.uint8), pts, validity)
    ys, xs = np.mgrid[0 : base.shape[0], 0 : base.shape[1]]
    at = (pts[50] + pts[205]) / 2
    spot = np.exp(-((xs - at[0]) ** 2 + (ys - at[1]) ** 2) / (2 * (0.06 * size) ** 2)).astype(np.float32)
    linear = (base.astype(np.float32) / 255.0) ** 2.2 + 0.5 * spot[:, :, None]  # white light, linear RGB
    lit = np.clip(np.clip(linear, 0, 1) ** (1 / 2.2) * 255.0 + 0.5, 0, 255).astype(np.uint8)
    out = tamed(lit, pts, validity)

    def ab(rgb: np.ndarray) -> np.ndarray:
        return np.asarray(cv2.cvtColor(rgb.astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB)[:, :, 1:])

    for where in (spot > 0.8, (spot > 0.3) & (spot < 0.6)):  # the spot's middle and its tail
        lost = np.linalg.norm((ab(lit) - ab(base))[where].mean(0))
        left = np.linalg.norm((ab(out) - ab(base))[where].mean(0))
        assert lost > 4.0 and left < 0.3 * lost, (lost, left)
    assert (out[validity == 0] == lit[validity == 0]).all()
