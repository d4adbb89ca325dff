"""Pipeline.process on mixed batches: order, per-stage timings and batch sizes, options, tracking, threads."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import cv2
import numpy as np
import pytest

from engines.factory import EngineConfig
from engines.frames import (
    STAGE_DETECT,
    STAGE_ENHANCE,
    STAGE_LANDMARK,
    STAGE_PASTE,
    STAGE_SWAP,
    FaceSettings,
    FaceTrack,
    FrameItem,
    FrameOptions,
    NoFaceFound,
    SourceFace,
    SourceNotPrepared,
)
from engines.models.store import ModelStore
from engines.pipeline import Pipeline, PipelineConfig
from engines.processors.face_detector import Face
from engines.processors.tracking import TrackingConfig

SWAP_ENHANCE = (STAGE_SWAP, STAGE_ENHANCE)


@pytest.fixture(scope="module")
def pipeline(model_store: ModelStore) -> Iterator[Pipeline]:
    p = Pipeline.from_config(PipelineConfig(processors=SWAP_ENHANCE), model_store)
    p.warmup()
    yield p
    p.close()


@pytest.fixture(scope="module")
def sources(pipeline: Pipeline, astronaut: np.ndarray, group_photo: np.ndarray) -> list[SourceFace]:
    x1, y1, x2, y2 = pipeline.detect([group_photo])[0][0].box.astype(int)
    crop = np.ascontiguousarray(group_photo[max(y1 - 60, 0) : y2 + 60, max(x1 - 60, 0) : x2 + 60])
    return [pipeline.prepare_source(astronaut, "astronaut"), pipeline.prepare_source(crop, "group0")]


def _changed(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.any(a != b))


def test_mixed_items_come_back_in_order_with_timings(
    pipeline: Pipeline, sources: list[SourceFace], astronaut: np.ndarray, group_photo: np.ndarray
) -> None:
    small = cv2.resize(group_photo, (640, 443))
    astro_240 = cv2.resize(astronaut, (240, 240))
    grey = np.full((180, 320, 3), 120, np.uint8)
    items = [
        FrameItem(small, sources[0], FrameOptions(processors=SWAP_ENHANCE)),  # 6 faces, swap + enhance
        FrameItem(astro_240, sources[1]),  # 1 face, swap only
        FrameItem(grey, sources[0]),  # no face
        FrameItem(astronaut, None),  # no source: untouched
        FrameItem(group_photo, sources[1], FrameOptions(processors=())),  # nothing asked: untouched
        FrameItem(astronaut, sources[0], FrameOptions(processors=(STAGE_ENHANCE,))),  # enhance only
    ]
    out = pipeline.process(items)
    assert len(out) == len(items)
    for item, o in zip(items, out, strict=True):
        assert o.image.shape == item.image.shape
    assert [o.faces for o in out] == [6, 1, 0, 0, 0, 1]
    assert _changed(out[0].image, small) and _changed(out[1].image, astro_240)
    assert out[2].image is grey and out[3].image is astronaut and out[4].image is group_photo
    assert _changed(out[5].image, astronaut)

    # Detector: one batch of the four frames that needed it; landmarks over all 8 faces; swap over the 7
    # swapped faces; enhancer over the 7 faces that asked for it; paste over every patch.
    assert out[0].batch_sizes == {
        STAGE_DETECT: 4,
        STAGE_LANDMARK: 8,
        STAGE_SWAP: 7,
        STAGE_ENHANCE: 7,
        STAGE_PASTE: 14,
    }
    assert set(out[1].batch_sizes) == {STAGE_DETECT, STAGE_LANDMARK, STAGE_SWAP, STAGE_PASTE}
    assert set(out[2].timings_ms) == {STAGE_DETECT}
    assert out[3].timings_ms == {} and out[4].timings_ms == {}
    assert set(out[5].timings_ms) == {STAGE_DETECT, STAGE_LANDMARK, STAGE_ENHANCE, STAGE_PASTE}
    for o in out[:3]:
        assert all(ms > 0 for ms in o.timings_ms.values())
    # One batch per stage: every member reports the same batch time.
    assert len({out[i].timings_ms[STAGE_DETECT] for i in (0, 1, 2, 5)}) == 1


def test_different_sources_give_different_faces(
    pipeline: Pipeline, sources: list[SourceFace], astronaut: np.ndarray
) -> None:
    a, b = pipeline.process([FrameItem(astronaut, sources[0]), FrameItem(astronaut, sources[1])])
    assert np.abs(a.image.astype(np.int16) - b.image.astype(np.int16)).mean() > 0.5


def test_tracking_detects_once_and_follows_the_face(
    pipeline: Pipeline, sources: list[SourceFace], astronaut: np.ndarray
) -> None:
    track = FaceTrack()
    shifts = [0, 4, 8, 12]
    stages = []
    for k, s in enumerate(shifts):
        frame = np.roll(astronaut, s, axis=1)
        out = pipeline.process([FrameItem(frame, sources[0], track=track, time_s=k / 15)])[0]
        stages.append(set(out.timings_ms))
        assert out.faces == 1
        faces = track.last_faces
        assert isinstance(faces, list) and len(faces) == 1 and isinstance(faces[0], Face)
        # The track follows the face whether or not the detector ran on this frame (smoothing lags a little).
        assert faces[0].landmarks is not None
        assert abs(faces[0].kps5[:, 0].mean() - (226.0 + s)) < 6.0
    # Detect only when needed: the first frame; FaceMesh on the previous mesh's crop after that.
    assert [STAGE_DETECT in st for st in stages] == [True, False, False, False]
    assert all(STAGE_LANDMARK in st and STAGE_SWAP in st for st in stages)
    assert track.frames_since_detect == 3 and len(track.faces) == 1 and track.faces[0].id == 0


def test_degradation_detect_every_two_with_per_frame_detection(
    model_store: ModelStore,
    astronaut: np.ndarray,
) -> None:
    """With the rescan interval at 1 frame (tracking's detection off), `detect_every=2` (the degradation
    controller's level) still halves the detector runs."""
    p = Pipeline.from_config(PipelineConfig(tracking=TrackingConfig(detect_every_frames=1)), model_store)
    try:
        src = p.prepare_source(astronaut, "a")
        track = FaceTrack()
        opts = FrameOptions(detect_every=2)
        ran = [
            STAGE_DETECT in p.process([FrameItem(astronaut, src, opts, track, time_s=k / 15)])[0].timings_ms
            for k in range(4)
        ]
        assert ran == [True, False, True, False]
        track = FaceTrack()
        ran = [
            STAGE_DETECT in p.process([FrameItem(astronaut, src, track=track, time_s=k / 15)])[0].timings_ms
            for k in range(3)
        ]
        assert ran == [True, True, True]
    finally:
        p.close()


def test_track_redetects_after_a_resolution_change(
    pipeline: Pipeline, sources: list[SourceFace], astronaut: np.ndarray
) -> None:
    track = FaceTrack()
    opts = FrameOptions(detect_every=10)
    first = pipeline.process([FrameItem(astronaut, sources[0], opts, track)])[0]
    smaller = cv2.resize(astronaut, (384, 384))
    second = pipeline.process([FrameItem(smaller, sources[0], opts, track)])[0]
    assert STAGE_DETECT in first.timings_ms and STAGE_DETECT in second.timings_ms
    assert second.image.shape == (384, 384, 3) and second.faces == 1


def test_detect_size_override_runs_its_own_batch(
    pipeline: Pipeline, sources: list[SourceFace], astronaut: np.ndarray
) -> None:
    small = FrameOptions(detect_size=192)
    items = [
        FrameItem(astronaut, sources[0]),
        FrameItem(astronaut, sources[0], small),
        FrameItem(astronaut, sources[0], small),
    ]
    out = pipeline.process(items)
    assert all(o.faces == 1 for o in out)
    assert out[0].batch_sizes[STAGE_DETECT] == 3  # two letterbox sizes, three frames in all


def test_max_faces_keeps_the_largest(
    model_store: ModelStore, group_photo: np.ndarray, astronaut: np.ndarray
) -> None:
    p = Pipeline.from_config(PipelineConfig(max_faces=2), model_store)
    try:
        all_faces = sorted(p.detector.detect([group_photo])[0], key=lambda f: f.area)  # unlimited
        src = p.prepare_source(astronaut, "a")
        out = p.process([FrameItem(group_photo, src)])[0]
        assert out.faces == 2 and len(p.detect([group_photo])[0]) == 2
        smallest = all_faces[0].box.astype(int)
        x1, y1, x2, y2 = smallest
        assert np.array_equal(out.image[y1:y2, x1:x2], group_photo[y1:y2, x1:x2])
    finally:
        p.close()
        p.close()  # idempotent


def test_concurrent_calls_match_sequential(
    pipeline: Pipeline, sources: list[SourceFace], astronaut: np.ndarray, group_photo: np.ndarray
) -> None:
    frames = [astronaut, cv2.resize(group_photo, (640, 443))]
    expected = [pipeline.process([FrameItem(f, sources[i % 2])])[0].image for i, f in enumerate(frames)]
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(3):
                results[i] = pipeline.process([FrameItem(frames[i], sources[i % 2])])[0].image
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    for i in range(2):
        assert np.array_equal(results[i], expected[i])


def test_prepare_source_without_a_face_raises(pipeline: Pipeline) -> None:
    with pytest.raises(NoFaceFound):
        pipeline.prepare_source(np.full((200, 200, 3), 128, np.uint8), "grey")


def test_a_source_is_prepared_once_with_what_the_swapper_reads(sources: list[SourceFace]) -> None:
    prepared = sources[0].prepared
    assert prepared is not None and prepared.mesh is not None and prepared.latent is None
    assert prepared.face.landmarks is not None and prepared.depth is not None
    assert prepared.mesh.shape is not None  # the 3-D shape, from the depth read at preparation


def test_the_live_path_refuses_a_source_that_was_not_prepared(
    pipeline: Pipeline, sources: list[SourceFace], astronaut: np.ndarray
) -> None:
    bare = SourceFace(id="bare", image=sources[0].image, faces=1)
    track = FaceTrack()
    with pytest.raises(SourceNotPrepared, match="'bare' was not prepared"):
        pipeline.process([FrameItem(astronaut, bare, track=track)])
    assert track.faces == [] and bare.prepared is None  # refused before any stage: nothing moved or made
    reference = FaceTrack(settings=FaceSettings(selector="reference", reference=bare))
    if pipeline.supports_reference:  # the reference face's embedding is made at preparation too
        with pytest.raises(SourceNotPrepared, match="'bare' has no ArcFace embedding"):
            pipeline.process([FrameItem(astronaut, sources[0], track=reference)])
    # frames that swap nothing need no source
    out = pipeline.process([FrameItem(astronaut, bare, FrameOptions(processors=()))])[0]
    assert out.image is astronaut


def test_debug_log_line_per_stage(
    pipeline: Pipeline, sources: list[SourceFace], astronaut: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="engines.pipeline"):
        pipeline.process([FrameItem(astronaut, sources[0]), FrameItem(astronaut, sources[1])])
    lines = [r.getMessage() for r in caplog.records if r.name == "engines.pipeline"]
    assert any(line.startswith("face_detector took ") and line.endswith("ms (batch 2)") for line in lines)
    for stage in (STAGE_LANDMARK, STAGE_SWAP, STAGE_PASTE):
        assert any(line.startswith(f"{stage} took ") for line in lines)


def test_closed_pipeline_refuses_work(model_store: ModelStore, astronaut: np.ndarray) -> None:
    p = Pipeline.from_config(PipelineConfig(), model_store)
    p.close()
    with pytest.raises(RuntimeError):
        p.process([FrameItem(astronaut, None)])


def test_single_threaded_workers_run_opencv_single_threaded_too(model_store: ModelStore) -> None:
    """One ONNX Runtime thread per call (the CPU default: one worker per core) makes the image work's
    OpenCV calls single-threaded as well; ORT's own threading (0) leaves OpenCV's pool as it is."""
    before = cv2.getNumThreads()
    try:
        cv2.setNumThreads(2)
        Pipeline.from_config(PipelineConfig(), model_store).close()
        assert cv2.getNumThreads() == 2
        Pipeline.from_config(PipelineConfig(engine=EngineConfig(intra_op_threads=1)), model_store).close()
        assert cv2.getNumThreads() == 1
    finally:
        cv2.setNumThreads(before)


def test_config_rejects_unknown_names() -> None:
    with pytest.raises(ValueError):
        PipelineConfig(swapper="nope")
    with pytest.raises(ValueError):
        PipelineConfig(processors=("face_debugger",))
    with pytest.raises(ValueError):
        PipelineConfig(detector_size=300)


def test_faces_cut_by_the_frame_edge_and_tiny_frames(
    pipeline: Pipeline, sources: list[SourceFace], astronaut: np.ndarray
) -> None:
    cut = np.ascontiguousarray(astronaut[:, 200:])  # the face's left part is outside the frame
    top = np.ascontiguousarray(astronaut[100:, :])  # the forehead is outside the frame
    tiny = cv2.resize(astronaut, (64, 64))
    out = pipeline.process(
        [FrameItem(f, sources[0], FrameOptions(processors=SWAP_ENHANCE)) for f in (cut, top, tiny)]
    )
    for frame, o in zip((cut, top, tiny), out, strict=True):
        assert o.image.shape == frame.shape
        if o.faces:
            assert _changed(o.image, frame)
