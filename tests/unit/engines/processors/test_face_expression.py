"""The shape offset's split into identity and expression (engines.processors.face_expression) on a real
mesh: the partition leaves the outline, nose and eyes to identity; a smile keeps its width, a talking mouth
its shape, a raised brow its height above the eye; the outline still takes the source's shape."""

from __future__ import annotations

import numpy as np
import pytest

from engines.frames import SourceFace
from engines.pipeline import Pipeline
from engines.processors.face_expression import split
from engines.processors.face_shape import mouth_gap, shape_offset
from engines.processors.masks import EYE_LEFT, EYE_RIGHT, INNER_LIPS
from engines.source.expression import BROW_LEFT, BROW_RIGHT, CORNERS, LIPS, expression_weights
from engines.source.mesh import MeshSource
from engines.source.shape import SourceShape
from engines.source.validity import FACE_OVAL, NOSE


@pytest.fixture(scope="module")
def shape(pipeline: Pipeline, astronaut: np.ndarray) -> SourceShape:
    source: SourceFace = pipeline.prepare_source(astronaut, "astronaut")
    mesh = source.prepared.mesh
    assert isinstance(mesh, MeshSource) and mesh.shape is not None
    return mesh.shape


def _frontal(shape: SourceShape, scale: float = 1.0) -> np.ndarray:
    return np.asarray(scale * shape.points[:, :2] + (320.0, 200.0))


def _about(points: np.ndarray, centre: np.ndarray, across: float, down: float) -> np.ndarray:
    return np.asarray(centre + (points - centre) * (across, down))


def test_the_partition_leaves_outline_nose_and_eyes_to_identity(shape: SourceShape) -> None:
    w = shape.expression
    assert w.shape == (468, 4) and (w >= 0).all() and (w[:, :3].sum(1) <= 1.0 + 1e-9).all()
    assert np.allclose(w[list(LIPS), 0], 1.0)
    assert np.allclose(w[list(BROW_RIGHT), 1], 1.0) and np.allclose(w[list(BROW_LEFT), 2], 1.0)
    assert (w[list(FACE_OVAL) + list(NOSE) + list(EYE_RIGHT) + list(EYE_LEFT), :3] == 0).all()
    assert np.allclose(w[list(CORNERS), 3], 1.0) and w[[0, 17], 3].max() < 0.5  # corners, not the middle
    assert np.allclose(w[list(INNER_LIPS), 3], 1.0)  # the opening: up and down too
    partial = (w[:, :3].sum(1) > 0.05) & (w[:, :3].sum(1) < 0.95)
    assert partial.sum() > 20  # a smooth falloff, not a cut
    # the same partition from the same face turned: read in the face's own frame
    a = np.deg2rad(25.0)
    rot = np.array([[np.cos(a), 0.0, np.sin(a)], [0.0, 1.0, 0.0], [-np.sin(a), 0.0, np.cos(a)]])
    assert np.allclose(expression_weights(shape.points @ rot.T), w, atol=1e-9)


def test_split_draws_each_region_to_its_anchor() -> None:
    rng = np.random.default_rng(2)
    offset = rng.normal(0.0, 3.0, (468, 2))
    w = np.zeros((468, 4))
    w[list(LIPS), 0] = 1.0
    w[5, 0] = 0.5
    w[[61, 291], 3] = 1.0  # the corners follow up and down too
    w[[70, 300], 1] = 1.0  # a point of the image-left brow (toward its eye), one of the image-right
    across = np.array([1.0, 0.0])
    out = split(offset, w, across)
    lips = offset[list(LIPS)].mean(0)
    assert np.allclose(out[list(LIPS), 0], lips[0])  # across: the mouth's anchor
    middle = [i for i in LIPS if i not in (61, 291)]
    assert np.allclose(out[middle, 1], offset[middle, 1])  # up and down: its own, but at the corners
    assert np.allclose(out[[61, 291]], lips)
    assert np.allclose(out[5], (0.5 * offset[5, 0] + 0.5 * lips[0], offset[5, 1]))
    assert np.allclose(out[[70, 300]], (offset[33] + offset[133]) / 2.0)
    rest = np.ones(468, bool)
    rest[list(LIPS) + [5, 70, 300]] = False
    assert np.array_equal(out[rest], offset[rest])


def test_a_smile_keeps_its_width_and_the_outline_its_shape(shape: SourceShape) -> None:
    rest = _frontal(shape)
    target = rest.copy()
    target[:, 0] = 320.0 + (target[:, 0] - 320.0) * 1.12  # a wider face than the source's...
    mouth = target[list(LIPS)].mean(0)
    target[list(LIPS)] = _about(target[list(LIPS)], mouth, 1.3, 1.0)  # ...smiling: the mouth 30 % wider
    new = target + shape_offset(shape, target)
    width = np.ptp(new[list(LIPS), 0])
    assert width == pytest.approx(np.ptp(target[list(LIPS), 0]), rel=0.01)  # the smile keeps its width
    assert np.ptp(new[list(FACE_OVAL), 0]) < 0.97 * np.ptp(target[list(FACE_OVAL), 0])  # the outline narrows
    # the brows move with their eyes: their height above the eye stays the target's
    for brow, eye in ((BROW_RIGHT, (33, 133)), (BROW_LEFT, (362, 263))):
        lift_t = target[list(eye)].mean(0)[1] - target[list(brow)].mean(0)[1]
        lift_n = new[list(eye)].mean(0)[1] - new[list(brow)].mean(0)[1]
        assert lift_n == pytest.approx(lift_t, abs=0.02 * lift_t)


def test_a_smiles_opening_is_the_targets_moved_as_one(shape: SourceShape) -> None:
    target = _frontal(shape, 1.1)
    inner = list(INNER_LIPS)
    target[inner] = _about(target[inner], target[inner].mean(0), 1.3, 2.5)  # a wide open smile
    new = target + shape_offset(shape, target)
    moved = new[inner] - target[inner]
    # every point of the opening moves by the same offset: its outline (and the teeth inside) not squeezed
    assert np.abs(moved - moved.mean(0)).max() < 1e-6
    outer = [i for i in LIPS if i not in inner and i not in CORNERS]
    # the lips' fullness stays the source's
    assert np.abs(new[outer, 1] - target[outer, 1] - moved[0, 1]).max() > 0.2


def test_a_talking_mouth_keeps_its_shape(shape: SourceShape) -> None:
    target = _frontal(shape)
    target[:, 1] = 200.0 + (target[:, 1] - 200.0) * 1.08  # a longer face...
    lips = list(LIPS)
    centre = target[lips].mean(0)
    target[lips] = _about(target[lips], centre, 0.8, 1.25)  # ...saying "oo": rounded and taller
    new = target + shape_offset(shape, target)
    moved = new[lips] - target[lips]
    # across the face the lips move as one (the rounded mouth keeps its width), and it opens as far
    assert np.abs(moved[:, 0] - moved[:, 0].mean()).max() < 0.01 * np.ptp(target[lips, 0])
    down = np.array([0.0, 1.0])
    assert mouth_gap(new, down) == pytest.approx(mouth_gap(target, down), abs=0.05)
    assert np.ptp(new[list(FACE_OVAL), 1]) < 0.985 * np.ptp(target[list(FACE_OVAL), 1])  # the face shortens
