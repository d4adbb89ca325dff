"""The shape offset's split into identity and expression (engines.processors.face_expression) on a real
mesh: the partition leaves the outline, nose and eyes to identity; a smile keeps its width, a talking mouth
its shape, a raised brow its rise above the session's rest (a still picture's brows are the source's); the
outline still takes the source's shape."""

from __future__ import annotations

import numpy as np
import pytest

from engines.frames import SourceFace
from engines.pipeline import Pipeline
from engines.processors.face_expression import at_rest, brows_pose, brows_raise, follow_rest, split
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
    w[[70, 300], 1] = 1.0  # brow points: the split leaves them (their raise is taken out before, at_rest)
    across = np.array([1.0, 0.0])
    out = split(offset, w, across)
    lips = offset[list(LIPS)].mean(0)
    assert np.allclose(out[list(LIPS), 0], lips[0])  # across: the mouth's anchor
    middle = [i for i in LIPS if i not in (61, 291)]
    assert np.allclose(out[middle, 1], offset[middle, 1])  # up and down: its own, but at the corners
    assert np.allclose(out[[61, 291]], lips)
    assert np.allclose(out[5], (0.5 * offset[5, 0] + 0.5 * lips[0], offset[5, 1]))
    rest = np.ones(468, bool)
    rest[list(LIPS) + [5]] = False
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
    # a still picture's brows are at rest: the source's own offset, untouched by the split
    full = shape_offset(shape, target, brows_pose(target))
    assert np.array_equal(full, shape_offset(shape, target))
    brows = list(BROW_RIGHT) + list(BROW_LEFT)
    assert np.abs(shape.expression[brows, 1:3].sum(1) - 1.0).max() < 1e-9


def test_a_raised_brow_rises_above_the_sources_brow(shape: SourceShape) -> None:
    rest_face = _frontal(shape, 1.05)
    rest = brows_pose(rest_face)
    raised = rest_face.copy()
    lift = 0.04 * np.ptp(rest_face[:, 1])  # both brows raised by 4 % of the face's height
    w = shape.expression[:, 1:3].sum(1)
    raised[:, 1] -= lift * w  # the brows and the forehead above them (the partition's falloff)
    at_rest = rest_face + shape_offset(shape, rest_face, rest)
    now = raised + shape_offset(shape, raised, rest)
    for brow, eye in ((BROW_RIGHT, (33, 133)), (BROW_LEFT, (362, 263))):
        height_rest = at_rest[list(eye)].mean(0)[1] - at_rest[list(brow)].mean(0)[1]
        height_now = now[list(eye)].mean(0)[1] - now[list(brow)].mean(0)[1]
        assert height_now - height_rest == pytest.approx(lift, rel=0.05)  # the raise, whole
    # with no rest (a still picture of a raised brow) the brows are the source's: the raise is mostly gone
    still = raised + shape_offset(shape, raised)
    for brow, eye in ((BROW_RIGHT, (33, 133)), (BROW_LEFT, (362, 263))):
        height_rest = at_rest[list(eye)].mean(0)[1] - at_rest[list(brow)].mean(0)[1]
        height_still = still[list(eye)].mean(0)[1] - still[list(brow)].mean(0)[1]
        assert abs(height_still - height_rest) < 0.5 * lift  # (the offset's smoothing spreads a little back)


def test_the_brows_rest_follows_a_held_pose_slowly() -> None:
    rest = np.array([[0.1, -0.6], [-0.1, -0.6]])
    raised = rest + (0.0, -0.1)
    assert np.array_equal(follow_rest(None, raised, 0.033), raised)  # the first pose is the rest
    r = rest
    for _ in range(15):  # half a second of a raise: most of it still shows
        r = follow_rest(r, raised, 1 / 30)
    assert np.abs(raised - r).max() > 0.85 * 0.1
    for _ in range(30 * 20):  # held for 20 s: it has become the rest
        r = follow_rest(r, raised, 1 / 30)
    assert np.abs(raised - r).max() < 0.01 * 0.1
    assert np.array_equal(follow_rest(rest, raised, 0.0), rest)  # a clock that did not move


def test_the_brows_pose_is_the_faces_own() -> None:
    rng = np.random.default_rng(4)
    face = rng.normal(0.0, 40.0, (468, 2)) + 200.0
    a = np.deg2rad(20.0)
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    moved = 1.7 * face @ rot.T + (35.0, -12.0)
    assert np.allclose(brows_pose(moved), brows_pose(face))
    assert np.allclose(brows_raise(moved, brows_pose(face)), 0.0, atol=1e-9)
    assert np.array_equal(brows_raise(face, None), np.zeros((2, 2)))
    w = np.zeros((468, 4))
    w[[70, 9], 1] = (1.0, 0.5)
    up = face.copy()
    up[[70, 9], 1] -= (6.0, 3.0)  # a brow and the forehead above it raised
    assert np.array_equal(at_rest(up, w, None), up)
    assert np.allclose(at_rest(up, w, brows_pose(up)), up, atol=1e-9)  # at its own rest: nothing taken out
    lowered = at_rest(up, w, brows_pose(face))  # against the face's rest: the brow comes down, weighted
    drop = lowered - up
    assert drop[70, 1] > 0 and np.allclose(drop[9], 0.5 * drop[70])
    others = np.ones(468, bool)
    others[[70, 9]] = False
    assert np.array_equal(lowered[others], up[others])


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
