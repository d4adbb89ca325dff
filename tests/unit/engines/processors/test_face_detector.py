"""RetinaFace detector on real images: counts, landmarks, letterbox mapping, batch == single calls."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from engines.factory import EngineConfig, create_engine
from engines.models.store import ModelStore
from engines.processors.face_detector import MEAN_BGR, FaceDetector, canvas_for, letterbox, nms, priors


@pytest.fixture(scope="module")
def detector(model_store: ModelStore) -> Iterator[FaceDetector]:
    engine = create_engine(model_store.require("retinaface_mnet025"), EngineConfig(), name="face_detector")
    yield FaceDetector(engine, size=320, score=0.5)
    engine.close()


@pytest.fixture(scope="module")
def carphone_frame(media: dict[str, Path]) -> np.ndarray:
    with av.open(str(media["carphone_pristine.mp4"])) as c:
        for frame in c.decode(video=0):
            return np.asarray(frame.to_ndarray(format="rgb24"))
    raise AssertionError("no frame decoded")


def test_finds_six_faces_in_group_photo(detector: FaceDetector, group_photo: np.ndarray) -> None:
    faces = detector.detect([group_photo])[0]
    assert len(faces) == 6
    assert all(f.score > 0.5 for f in faces)
    # Six different people: no two boxes overlap much.
    centers = np.array([[(f.box[0] + f.box[2]) / 2, (f.box[1] + f.box[3]) / 2] for f in faces])
    d = np.linalg.norm(centers[:, None] - centers[None], axis=2) + np.eye(6) * 1e9
    assert d.min() > 50


def test_finds_one_face_in_astronaut(detector: FaceDetector, astronaut: np.ndarray) -> None:
    faces = detector.detect([astronaut])[0]
    assert len(faces) == 1
    x1, y1, x2, y2 = faces[0].box
    # The face sits in the upper middle of the 512x512 portrait.
    assert 150 < x1 < x2 < 300 and 30 < y1 < y2 < 220
    assert 60 < x2 - x1 < 150


def test_no_face_in_flat_grey(detector: FaceDetector) -> None:
    assert detector.detect([np.full((240, 320, 3), 128, np.uint8)]) == [[]]


def test_five_landmarks_inside_their_boxes(
    detector: FaceDetector, group_photo: np.ndarray, astronaut: np.ndarray
) -> None:
    for faces in detector.detect([group_photo, astronaut]):
        for f in faces:
            assert f.kps5.shape == (5, 2)
            assert np.all(f.kps5[:, 0] >= f.box[0]) and np.all(f.kps5[:, 0] <= f.box[2])
            assert np.all(f.kps5[:, 1] >= f.box[1]) and np.all(f.kps5[:, 1] <= f.box[3])
            # Eyes above the nose above the mouth; image-left eye left of the other.
            assert f.kps5[0, 0] < f.kps5[1, 0]
            assert max(f.kps5[0, 1], f.kps5[1, 1]) < f.kps5[2, 1] < min(f.kps5[3, 1], f.kps5[4, 1])


def test_batch_of_four_equals_four_single_calls(
    detector: FaceDetector, astronaut: np.ndarray, group_photo: np.ndarray, carphone_frame: np.ndarray
) -> None:
    frames = [astronaut, group_photo, carphone_frame, cv2.resize(astronaut, (320, 240))]
    batched = detector.detect(frames)
    singles = [detector.detect([f])[0] for f in frames]
    assert [len(b) for b in batched] == [len(s) for s in singles] == [1, 6, 1, 1]
    for b_faces, s_faces in zip(batched, singles, strict=True):
        for b, s in zip(b_faces, s_faces, strict=True):
            assert np.abs(b.box - s.box).max() <= 1.0
            assert np.abs(b.kps5 - s.kps5).max() <= 1.0


def test_detector_size_changes_cost_not_answer(detector: FaceDetector, astronaut: np.ndarray) -> None:
    small = detector.detect([astronaut], size=256)[0]
    large = detector.detect([astronaut], size=640)[0]
    assert len(small) == len(large) == 1
    assert np.abs(small[0].box - large[0].box).max() < 0.1 * large[0].width


def _letterbox_reference(images: list[np.ndarray], canvas: tuple[int, int]) -> np.ndarray:
    """The straightforward formula the fast letterbox must reproduce bit for bit."""
    ch, cw = canvas
    batch = np.zeros((len(images), 3, ch, cw), dtype=np.float32)
    for i, img in enumerate(images):
        h, w = img.shape[:2]
        scale = min(cw / w, ch / h)
        nw, nh = max(1, min(cw, round(w * scale))), max(1, min(ch, round(h * scale)))
        resized = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR) if (nw, nh) != (w, h) else img
        batch[i, :, :nh, :nw] = (resized[:, :, ::-1].astype(np.float32) - MEAN_BGR).transpose(2, 0, 1)
    return batch


def test_letterbox_equals_the_reference_formula(astronaut: np.ndarray) -> None:
    frames = [cv2.resize(astronaut, size) for size in ((320, 240), (640, 360), (200, 400), (320, 256))]
    for canvas in ((256, 320), (192, 320), (320, 320)):
        tensor, _ = letterbox(frames, canvas)
        assert np.array_equal(tensor, _letterbox_reference(frames, canvas))


def test_letterbox_keeps_aspect_and_pads_with_mean() -> None:
    img = np.full((100, 200, 3), (123, 117, 104), np.uint8)  # RGB of the BGR mean
    canvas = canvas_for(100, 200, 320)
    assert canvas == (160, 320)  # 2:1 -> long side 320, short side 160 (a multiple of 32)
    tensor, scales = letterbox([img], canvas)
    assert tensor.shape == (1, 3, 160, 320) and scales == [1.6]
    assert np.abs(tensor[0]).max() < 1e-4  # the image: exactly the mean, no padding needed
    odd = np.full((90, 160, 3), (123, 117, 104), np.uint8)  # 16:9 -> 320x180, canvas 320x192
    assert canvas_for(90, 160, 320) == (192, 320) and canvas_for(160, 90, 320) == (320, 192)
    tensor, _ = letterbox([odd], (192, 320))
    assert np.abs(tensor[0, :, :180, :]).max() < 1e-4
    assert np.abs(tensor[0, :, 180:, :]).max() == 0.0  # the padding: zero after mean subtraction


def test_priors_match_the_model_head(detector: FaceDetector) -> None:
    # 320x320: (40*40 + 20*20 + 10*10) cells x 2 sizes
    assert priors(320, 320).shape == (4200, 4)
    out = detector.engine.infer({"input": np.zeros((1, 3, 320, 320), np.float32)})
    assert out["loc"].shape[1] == 4200
    # 192x320 (16:9 canvas): (24*40 + 12*20 + 6*10) cells x 2 sizes
    assert priors(192, 320).shape == (2520, 4)
    out = detector.engine.infer({"input": np.zeros((1, 3, 192, 320), np.float32)})
    assert out["loc"].shape[1] == 2520


def test_wide_and_square_canvases_find_the_same_face(detector: FaceDetector, astronaut: np.ndarray) -> None:
    """The tight canvas changes the padding, not the scale: boxes match a square letterbox's within 2 px."""
    wide = np.full((288, 512, 3), 90, np.uint8)
    wide[:, 112:400] = cv2.resize(astronaut, (288, 288))
    square = np.full((512, 512, 3), 90, np.uint8)
    square[:288] = wide
    (a,), (b,) = detector.detect([wide])[0], detector.detect([square])[0]
    assert np.abs(a.box - b.box).max() < 2.0 and np.abs(a.kps5 - b.kps5).max() < 2.0


def test_nms_keeps_best_of_overlapping() -> None:
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], dtype=np.float32)
    keep = nms(boxes, np.array([0.8, 0.9, 0.7]), 0.4)
    assert keep.tolist() == [1, 2]
