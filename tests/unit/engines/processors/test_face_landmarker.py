"""FaceMesh landmarker on real faces: points on the face, eyes where the detector saw them, batching."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest

from engines.factory import EngineConfig, create_engine
from engines.models.store import ModelStore
from engines.onnx.model_cache import serving_model
from engines.processors.face_detector import Face, FaceDetector
from engines.processors.face_landmarker import (
    EYE_A,
    EYE_B,
    INPUT_SIZE,
    FaceLandmarker,
    crop_batch,
    crop_matrix,
    kps5_from_mesh,
)
from engines.processors.tracking import measured


@pytest.fixture(scope="module")
def detector(model_store: ModelStore) -> Iterator[FaceDetector]:
    engine = create_engine(model_store.require("retinaface_mnet025"), EngineConfig())
    yield FaceDetector(engine)
    engine.close()


@pytest.fixture(scope="module")
def landmarker(model_store: ModelStore) -> Iterator[FaceLandmarker]:
    engine = create_engine(serving_model(model_store.require("facemesh_468")), EngineConfig())
    yield FaceLandmarker(engine)
    engine.close()


def _dilate(box: np.ndarray, frac: float) -> np.ndarray:
    w, h = box[2] - box[0], box[3] - box[1]
    return box + np.array([-w, -h, w, h]) * frac


def test_astronaut_mesh_lies_on_the_face(
    detector: FaceDetector, landmarker: FaceLandmarker, astronaut: np.ndarray
) -> None:
    face = detector.detect([astronaut])[0][0]
    mesh = landmarker.run([(astronaut, face)])[0]
    assert mesh.landmarks.shape == (468, 2)
    assert mesh.presence > 0.9
    x1, y1, x2, y2 = _dilate(face.box, 0.08)
    pts = mesh.landmarks
    assert np.all((pts[:, 0] >= x1) & (pts[:, 0] <= x2) & (pts[:, 1] >= y1) & (pts[:, 1] <= y2))
    # The mesh spans the face, not a dot inside it.
    assert np.ptp(pts[:, 0]) > 0.8 * face.width and np.ptp(pts[:, 1]) > 0.8 * face.height
    # Eye points sit in the detector's eye regions.
    radius = 0.15 * face.width
    for idx, det_eye in ((EYE_A, face.kps5[0]), (EYE_B, face.kps5[1])):
        for i in idx:
            assert np.linalg.norm(pts[i] - det_eye) < radius
        assert np.linalg.norm(pts[list(idx)].mean(0) - det_eye) < 0.08 * face.width


def test_group_photo_meshes_and_derived_kps(
    detector: FaceDetector, landmarker: FaceLandmarker, group_photo: np.ndarray
) -> None:
    faces = detector.detect([group_photo])[0]
    meshes = landmarker.run([(group_photo, f) for f in faces])
    assert len(meshes) == 6
    for face, mesh in zip(faces, meshes, strict=True):
        assert landmarker.is_face(mesh)
        kps = kps5_from_mesh(mesh.landmarks)
        assert np.abs(kps - face.kps5).max() < 0.2 * face.width


def test_batched_equals_single(
    detector: FaceDetector, landmarker: FaceLandmarker, group_photo: np.ndarray, astronaut: np.ndarray
) -> None:
    assert landmarker.engine.batch.max > 1, "the dynamic-batch rewrite should be in use"
    jobs = [(group_photo, f) for f in detector.detect([group_photo])[0][:3]]
    jobs.append((astronaut, detector.detect([astronaut])[0][0]))
    batched = landmarker.run(jobs)
    singles = [landmarker.run([j])[0] for j in jobs]
    for b, s in zip(batched, singles, strict=True):
        assert np.abs(b.landmarks - s.landmarks).max() < 0.05
        assert abs(b.presence - s.presence) < 1e-3


def test_presence_rejects_a_non_face(landmarker: FaceLandmarker) -> None:
    grey = np.full((240, 320, 3), 90, np.uint8)
    fake = Face(
        box=np.array([100, 60, 200, 180], np.float32),
        score=0.9,
        kps5=np.array([[130, 100], [170, 100], [150, 125], [135, 150], [165, 150]], np.float32),
    )
    mesh = landmarker.run([(grey, fake)])[0]
    assert not landmarker.is_face(mesh)


def test_tracking_from_the_mesh_follows_a_moved_face(
    detector: FaceDetector, landmarker: FaceLandmarker, astronaut: np.ndarray
) -> None:
    face = detector.detect([astronaut])[0][0]
    mesh = landmarker.run([(astronaut, face)])[0]
    tracked = measured(face, mesh.landmarks, mesh.presence)
    shifted = np.roll(astronaut, (12, -9), axis=(0, 1))  # the face moved 9 px left, 12 px down
    moved = landmarker.run([(shifted, tracked)])[0]
    assert landmarker.is_face(moved)
    shift = (moved.landmarks - mesh.landmarks).mean(0)
    assert np.abs(shift - (-9, 12)).max() < 2.0


def test_crop_batch_is_the_models_nchw_input(
    detector: FaceDetector, astronaut: np.ndarray, group_photo: np.ndarray
) -> None:
    """Plane-wise fill + one scaling pass gives exactly the warp -> transpose -> /255 input it replaced."""
    jobs = [(astronaut, detector.detect([astronaut])[0][0])]
    jobs += [(group_photo, f) for f in detector.detect([group_photo])[0][:2]]
    matrices = [crop_matrix(f) for _, f in jobs]
    batch = crop_batch([fr for fr, _ in jobs], matrices)
    assert batch.shape == (3, 3, INPUT_SIZE, INPUT_SIZE) and batch.dtype == np.float32
    for i, ((frame, _), m) in enumerate(zip(jobs, matrices, strict=True)):
        crop = cv2.warpAffine(
            frame, m, (INPUT_SIZE, INPUT_SIZE), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT
        )
        np.testing.assert_array_equal(batch[i], crop.transpose(2, 0, 1).astype(np.float32) * (1.0 / 255.0))
    assert 0.2 < float(batch.mean()) < 0.8


def test_kps5_from_mesh_is_the_eye_centres_nose_and_mouth_corners(astronaut: np.ndarray) -> None:
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float64):
        mesh = (rng.random((468, 2)) * 300).astype(dtype)
        expected = np.stack(
            [mesh[list(EYE_A)].mean(0), mesh[list(EYE_B)].mean(0), mesh[1], mesh[61], mesh[291]]
        ).astype(np.float32)
        np.testing.assert_array_equal(kps5_from_mesh(mesh), expected)


def test_crop_levels_the_eyes(detector: FaceDetector, astronaut: np.ndarray) -> None:
    face = detector.detect([astronaut])[0][0]
    m = crop_matrix(face)
    eyes = face.kps5[:2] @ m[:, :2].T + m[:, 2]
    assert abs(eyes[0, 1] - eyes[1, 1]) < 0.5
    assert 40 < eyes[0, 0] < eyes[1, 0] < 152


def test_serving_model_is_cached_by_hash(model_store: ModelStore, tmp_path: Path) -> None:
    src = tmp_path / "face_landmark_468.onnx"
    shutil.copyfile(model_store.require("facemesh_468"), src)
    first = serving_model(src)
    assert first != src and first.parent == tmp_path and ".serve" in first.name
    mtime = first.stat().st_mtime_ns
    assert serving_model(src) == first and first.stat().st_mtime_ns == mtime
    served = onnx.load(str(first))
    assert not [n for n in served.graph.node if n.op_type == "PRelu"]  # all 23 spelled as Relu arithmetic
    engine = create_engine(first, EngineConfig())
    try:
        assert engine.batch.max > 1
    finally:
        engine.close()


def test_a_read_only_model_directory_serves_the_original(
    model_store: ModelStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the rewritten copy cannot be written (an image layer, a read-only volume), the original serves:
    the rewrite is an optimisation. `python -m engines.models prepare` makes the copies beforehand."""
    import tempfile

    src = tmp_path / "face_landmark_468.onnx"
    shutil.copyfile(model_store.require("facemesh_468"), src)

    def read_only(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    assert serving_model(src) == src
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]
