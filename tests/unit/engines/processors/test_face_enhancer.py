"""Face enhancers: the weight-free "detail" default and the GFPGAN path on a stand-in graph."""

from __future__ import annotations

from collections.abc import Iterator

import cv2
import numpy as np
import pytest

from engines.frames import STAGE_ENHANCE, STAGE_SWAP, FaceTrack, FrameItem, FrameOptions
from engines.models.registry import get_spec
from engines.models.store import ModelStore, sha256_file
from engines.pipeline import Pipeline, PipelineConfig
from engines.processors.face_enhancer import DetailEnhancer, GfpganEnhancer
from engines.processors.paste import paste_back
from tests.harness.onnx_graphs import copy_embedded_models, gfpgan_graph

ENHANCE_ONLY = FrameOptions(processors=(STAGE_ENHANCE,))


def _sharpness(img: np.ndarray) -> float:
    return float(cv2.Laplacian(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY), cv2.CV_64F).var())


@pytest.fixture(scope="module")
def detail_pipeline(model_store: ModelStore) -> Iterator[Pipeline]:
    p = Pipeline.from_config(PipelineConfig(processors=(STAGE_SWAP, STAGE_ENHANCE)), model_store)
    yield p
    p.close()


@pytest.fixture(scope="module")
def gfpgan_pipeline(tmp_path_factory: pytest.TempPathFactory, model_store: ModelStore) -> Iterator[Pipeline]:
    store = ModelStore(tmp_path_factory.mktemp("models"))
    copy_embedded_models(store, model_store)
    graph = gfpgan_graph(tmp_path_factory.mktemp("graphs") / "gfpgan.onnx")
    store.add(get_spec("gfpgan_1.4"), graph, sha256_file(graph))
    p = Pipeline.from_config(
        PipelineConfig(processors=(STAGE_SWAP, STAGE_ENHANCE), enhancer="gfpgan_1.4", enhancer_blend=1.0),
        store,
    )
    yield p
    p.close()


def _outside_unchanged(out: np.ndarray, src: np.ndarray, boxes: list[np.ndarray], grow: float = 0.0) -> bool:
    changed = np.any(out != src, axis=2)
    for b in boxes:
        x1, y1, x2, y2 = b
        gx, gy = grow * (x2 - x1), grow * (y2 - y1)
        x1, y1, x2, y2 = x1 - gx, y1 - gy, x2 + gx, y2 + gy
        changed[max(int(y1) - 1, 0) : int(np.ceil(y2)) + 1, max(int(x1) - 1, 0) : int(np.ceil(x2)) + 1] = (
            False
        )
    return not changed.any()


def test_detail_sharpens_the_face_only(detail_pipeline: Pipeline, astronaut: np.ndarray) -> None:
    assert isinstance(detail_pipeline.enhancer, DetailEnhancer)
    track = FaceTrack()
    out = detail_pipeline.process([FrameItem(astronaut, None, ENHANCE_ONLY, track)])[0]
    assert out.faces == 1 and out.batch_sizes[STAGE_ENHANCE] == 1
    face = track.last_faces[0]  # the box the enhancer worked on: the mesh's extent
    x1, y1, x2, y2 = face.box.astype(int)
    inner = (slice(y1 + 10, y2 - 10), slice(x1 + 10, x2 - 10))
    assert _sharpness(out.image[inner]) > 1.3 * _sharpness(astronaut[inner])
    assert _outside_unchanged(out.image, astronaut, [face.box])


def test_detail_blend_zero_changes_nothing(astronaut: np.ndarray, detail_pipeline: Pipeline) -> None:
    face = detail_pipeline.detect([astronaut])[0][0]
    patch = DetailEnhancer(blend=0.0).enhance([(astronaut, face)])[0]
    assert patch is not None
    frame = astronaut.copy()
    paste_back(frame, patch)
    assert np.array_equal(frame, astronaut)


def test_enhancer_off_unless_asked(detail_pipeline: Pipeline, astronaut: np.ndarray) -> None:
    src = detail_pipeline.prepare_source(astronaut, "a")
    both_on = FrameOptions(processors=(STAGE_SWAP, STAGE_ENHANCE))
    swap_only, both = detail_pipeline.process([FrameItem(astronaut, src), FrameItem(astronaut, src, both_on)])
    assert STAGE_ENHANCE not in swap_only.timings_ms and STAGE_ENHANCE in both.timings_ms
    assert not np.array_equal(swap_only.image, both.image)


def test_gfpgan_runs_batched_over_every_face(
    gfpgan_pipeline: Pipeline, group_photo: np.ndarray, astronaut: np.ndarray
) -> None:
    assert isinstance(gfpgan_pipeline.enhancer, GfpganEnhancer)
    tracks = [FaceTrack(), FaceTrack()]
    out = gfpgan_pipeline.process(
        [
            FrameItem(group_photo, None, ENHANCE_ONLY, tracks[0]),
            FrameItem(astronaut, None, ENHANCE_ONLY, tracks[1]),
        ]
    )
    assert [o.faces for o in out] == [6, 1]
    assert out[0].batch_sizes[STAGE_ENHANCE] == 7
    for o, src, track in zip(out, (group_photo, astronaut), tracks, strict=True):
        faces = track.last_faces
        # The paste mask reaches the face's mesh box grown by masks.REGION_GROW, no further.
        assert _outside_unchanged(o.image, src, [f.box for f in faces], grow=0.12)
        for f in faces:
            # tanh(2x) stretches contrast: the face's pixel spread grows.
            x1, y1, x2, y2 = f.box.astype(int)
            cx, cy, w, h = (x1 + x2) // 2, (y1 + y2) // 2, (x2 - x1) // 4, (y2 - y1) // 4
            assert (
                o.image[cy - h : cy + h, cx - w : cx + w].std()
                > 1.1 * src[cy - h : cy + h, cx - w : cx + w].std()
            )
