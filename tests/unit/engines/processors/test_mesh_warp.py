"""mesh_warp swap of a real face onto a real talking-head clip: local, visible, and following the target."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from engines.frames import FrameItem, SourceFace
from engines.pipeline import Pipeline
from engines.processors.paste import FacePatch, paste_back, translation
from engines.source.mesh import MeshSource, triangulate


@pytest.fixture(scope="module")
def carphone(media: dict[str, Path]) -> list[np.ndarray]:
    """Ten frames spread over the first 3 s of the clip (the head moves and talks)."""
    frames = []
    with av.open(str(media["carphone_pristine.mp4"])) as c:
        for i, frame in enumerate(c.decode(video=0)):
            if i % 8 == 0:
                frames.append(np.asarray(frame.to_ndarray(format="rgb24")))
            if len(frames) == 10:
                break
    return frames


def test_source_is_triangulated_once(source: SourceFace) -> None:
    mesh = source.prepared.mesh
    assert isinstance(mesh, MeshSource)
    assert mesh.landmarks.shape == (468, 2)
    # Delaunay of 468 points with h hull points has 2n - 2 - h triangles.
    assert 800 < len(mesh.triangles) < 934
    assert mesh.triangles.min() >= 0 and mesh.triangles.max() < 468
    assert 100 < len(mesh.mask_points) < 468  # the upper forehead is left out of the blend mask


def test_triangulate_covers_a_square_grid() -> None:
    xs, ys = np.meshgrid(np.arange(4.0), np.arange(4.0))
    pts = np.stack([xs.ravel(), ys.ravel()], 1) * 10
    tris = triangulate(pts)
    a, b = pts[tris[:, 1]] - pts[tris[:, 0]], pts[tris[:, 2]] - pts[tris[:, 0]]
    area = np.abs(a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]).sum() / 2
    assert len(tris) == 18 and area == pytest.approx(900.0)


def test_swap_is_local_visible_and_follows_the_target(
    pipeline: Pipeline, source: SourceFace, carphone: list[np.ndarray]
) -> None:
    before = pipeline.detect(carphone)
    assert all(len(f) == 1 for f in before)
    outputs = pipeline.process([FrameItem(image=f, source=source) for f in carphone])
    centres_in, centres_out = [], []
    for frame, out, faces in zip(carphone, outputs, before, strict=True):
        assert out.image.shape == frame.shape and out.image.dtype == np.uint8
        assert out.faces == 1
        face = faces[0]
        w, h = face.width, face.height
        # the face's region: its mesh's extent (the swap moves the outline to the source's) grown by 15 %
        lm = pipeline.landmarker.run([(frame, face)])[0].landmarks
        lo, hi = lm.min(0), lm.max(0)
        mw, mh = hi - lo
        x1, y1 = int(lo[0] - 0.15 * mw), int(lo[1] - 0.15 * mh)
        x2, y2 = int(hi[0] + 0.15 * mw) + 1, int(hi[1] + 0.15 * mh) + 1
        diff = np.abs(out.image.astype(np.int16) - frame.astype(np.int16)).max(axis=2)
        outside = diff.copy()
        outside[max(y1, 0) : y2, max(x1, 0) : x2] = 0
        assert outside.max() == 0, "pixels changed outside the face"
        inner = diff[
            int(face.box[1] + 0.3 * h) : int(face.box[3] - 0.2 * h),
            int(face.box[0] + 0.25 * w) : int(face.box[2] - 0.25 * w),
        ]
        assert inner.mean() > 8, "the face itself barely changed"
        centres_in.append(face.kps5.mean(0))
    after = pipeline.detect([o.image for o in outputs])
    assert all(len(f) == 1 for f in after)
    for faces in after:
        centres_out.append(faces[0].kps5.mean(0))
    c_in, c_out = np.array(centres_in), np.array(centres_out)
    assert np.ptp(c_in[:, 0]) > 5, "the clip should move the face"
    # The swapped face is where the target's face is, frame by frame (QCIF: face ~45 px wide).
    assert np.abs(c_out - c_in).max() < 4.0
    # And it moves with it.
    assert np.corrcoef(c_in[:, 0], c_out[:, 0])[0, 1] > 0.9


def test_every_face_in_a_group_is_swapped(
    pipeline: Pipeline, source: SourceFace, group_photo: np.ndarray
) -> None:
    out = pipeline.process([FrameItem(image=group_photo, source=source)])[0]
    assert out.faces == 6 and out.batch_sizes["face_swapper"] == 6
    for face in pipeline.detect([group_photo])[0]:
        x1, y1, x2, y2 = face.box.astype(int)
        region = np.abs(out.image[y1:y2, x1:x2].astype(np.int16) - group_photo[y1:y2, x1:x2]).mean()
        assert region > 5


def test_paste_touches_only_the_patch_footprint() -> None:
    frame = np.full((50, 60, 3), 10, np.uint8)
    patch = FacePatch(
        image=np.full((10, 12, 3), 200.0, np.float32),
        mask=np.ones((10, 12), np.float32),
        matrix=translation(20, 30),
    )
    assert paste_back(frame, patch) == (20, 30, 32, 40)
    assert (frame[30:40, 20:32] == 200).all()
    frame[30:40, 20:32] = 10
    assert (frame == 10).all()


def test_folded_triangles_of_a_turned_face_are_culled() -> None:
    """Where a head turns away the 2-D mesh folds: mirrored or collapsed triangles must not be drawn."""
    from engines.processors.mesh_warp import front_facing

    src = np.array(
        [[[0, 0], [10, 0], [0, 10]], [[0, 0], [10, 0], [0, 10]], [[0, 0], [10, 0], [0, 10]]], dtype=np.float64
    )
    dst = np.array(
        [
            [[5, 5], [25, 5], [5, 25]],  # same orientation, scaled: visible
            [[0, 0], [0, 10], [10, 0]],  # mirrored (folded over): back-facing
            [[0, 0], [10, 0], [20, 0.01]],  # collapsed to a sliver: nothing to draw
        ],
        dtype=np.float64,
    )
    assert front_facing(src, dst).tolist() == [True, False, False]
