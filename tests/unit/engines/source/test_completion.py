"""A frontal source's skin under a strand of hair, read at its mirror image (source_completion), on a real
face: the mirror map sends each mesh point to its mirror point, a strand painted across a cheek and refused
by the validity map is replaced by skin close to what it hid, and nothing valid is touched."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engines.frames import SourceFace
from engines.pipeline import Pipeline
from engines.source.completion import completed, mirror_map
from engines.source.mesh import MeshSource, triangulate
from engines.source.mirror import mirror_index
from engines.source.validity import validity_map


@pytest.fixture(scope="module")
def face(pipeline: Pipeline, astronaut: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    source: SourceFace = pipeline.prepare_source(astronaut, "astronaut")
    lm = source.prepared.face.landmarks
    assert lm is not None and isinstance(source.prepared.mesh, MeshSource)
    pts = np.asarray(lm, dtype=np.float32)
    return pts, triangulate(pts)


def test_the_mirror_map_sends_each_mesh_point_to_its_mirror(
    astronaut: np.ndarray, face: tuple[np.ndarray, np.ndarray]
) -> None:
    pts, tris = face
    map_x, map_y, covered = mirror_map(pts, tris, astronaut.shape[:2])
    inner = [i for i in range(468) if covered[int(round(pts[i, 1])), int(round(pts[i, 0]))]]
    assert len(inner) > 400
    at = np.round(pts[inner]).astype(int)
    got = np.column_stack([map_x[at[:, 1], at[:, 0]], map_y[at[:, 1], at[:, 0]]])
    want = pts[mirror_index()[inner]]
    # a pixel centre up to half a pixel from the point, the map's local scale about one
    assert np.median(np.hypot(*(got - want).T)) < 1.0
    assert (map_x[~covered] == -1).all()


def _strand(shape: tuple[int, ...], pts: np.ndarray) -> np.ndarray:
    """A wavy line down the middle of the face's left cheek (image right), 5 px wide."""
    mask = np.zeros(shape[:2], np.uint8)
    eye, mouth, side = pts[263], pts[291], pts[454]  # left eye's outer corner, mouth corner, cheek's edge
    out = 0.25 * (side - (eye + mouth) / 2)
    top, bottom = 0.6 * eye + 0.4 * mouth + out, 0.2 * eye + 0.8 * mouth + out  # clear of the eye
    ys = np.linspace(top[1], bottom[1], 30)
    xs = np.linspace(top[0], bottom[0], 30) + 3.0 * np.sin(np.linspace(0, 3 * np.pi, 30))
    line = np.round(np.column_stack([xs, ys])).astype(np.int32)
    cv2.polylines(mask, [line], False, 255, thickness=5)
    return mask > 0


def test_a_strand_across_a_cheek_is_completed_from_the_other_cheek(
    astronaut: np.ndarray, face: tuple[np.ndarray, np.ndarray]
) -> None:
    pts, tris = face
    strand = _strand(astronaut.shape, pts)
    hairy = astronaut.copy()
    hairy[strand] = (120, 60, 30)  # a brown strand
    validity = validity_map(hairy, pts)
    assert (validity[strand] < 128).mean() > 0.9, "the validity map refuses the strand"
    image, valid = completed(hairy, validity, pts, tris)
    assert (valid[strand] >= 128).mean() > 0.9, "now valid: its mirror is"
    before = np.abs(hairy[strand].astype(int) - astronaut[strand].astype(int)).mean()
    after = np.abs(image[strand].astype(int) - astronaut[strand].astype(int)).mean()
    assert after < 0.25 * before, f"skin close to what the strand hid ({before:.1f} -> {after:.1f} levels)"
    # valid pixels away from any refused one are untouched, and nothing turns valid outside the mesh
    far = cv2.erode(validity, np.ones((15, 15), np.uint8)) == 255
    assert far.sum() > 1000 and (image[far] == hairy[far]).all()
    _, _, covered = mirror_map(pts, tris, astronaut.shape[:2])
    assert not ((valid >= 128) & (validity < 128) & ~covered).any()


def test_what_is_refused_on_both_sides_stays_refused(
    astronaut: np.ndarray, face: tuple[np.ndarray, np.ndarray]
) -> None:
    """A strand on both cheeks, mirror images of each other: nothing to read it from, it stays refused
    (not pasted, whatever its pixels now hold)."""
    pts, tris = face
    strand = _strand(astronaut.shape, pts)
    map_x, map_y, _ = mirror_map(pts, tris, astronaut.shape[:2])
    mirrored = cv2.remap(strand.astype(np.uint8), map_x, map_y, cv2.INTER_NEAREST) > 0
    both = strand | mirrored
    hairy = astronaut.copy()
    hairy[both] = (120, 60, 30)
    validity = validity_map(hairy, pts)
    validity[both] = 0  # (refused on both sides)
    image, valid = completed(hairy, validity, pts, tris)
    core = cv2.erode(strand.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    assert (valid[core] < 64).all()
    assert np.abs(image[core].astype(int) - hairy[core].astype(int)).mean() < 10  # not read elsewhere
