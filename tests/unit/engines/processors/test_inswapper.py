"""inswapper_128 + ArcFace path on stand-in graphs with the real signatures, batched across faces."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engines.frames import STAGE_PASTE, STAGE_SWAP, FrameItem
from engines.models.registry import ModelSpec, get_spec
from engines.models.store import PINS_FILE, ModelStore, ModelUnavailable, sha256_file
from engines.pipeline import Pipeline, PipelineConfig
from engines.processors.inswapper import InswapperSwapper, load_emap
from tests.harness.onnx_graphs import arcface_graph, copy_embedded_models, inswapper_graph


class StandInStore(ModelStore):
    """The registry pins the real inswapper_128's sha256, so a stand-in can only be trusted through a pin.

    Everything else (require, hash check on every load) is the real store's code.
    """

    def expected_sha256(self, spec: ModelSpec) -> str | None:
        return self._pins().get(spec.id) or super().expected_sha256(spec)


@pytest.fixture(scope="module")
def swap_store(tmp_path_factory: pytest.TempPathFactory, model_store: ModelStore) -> StandInStore:
    root = tmp_path_factory.mktemp("models")
    store = StandInStore(root)
    copy_embedded_models(store, model_store)
    build = tmp_path_factory.mktemp("graphs")
    arc = arcface_graph(build / "arcface.onnx")
    store.add(get_spec("arcface_w600k_r50"), arc, sha256_file(arc))
    swp = inswapper_graph(build / "inswapper.onnx")
    spec = get_spec("inswapper_128")
    # ModelStore.pin refuses to override the registry's pin (rightly): write the stand-in's pin directly.
    pins = json.loads((root / PINS_FILE).read_text())
    pins[spec.id] = sha256_file(swp)
    (root / PINS_FILE).write_text(json.dumps(pins))
    shutil.copyfile(swp, store.path(spec))
    return store


@pytest.fixture(scope="module")
def pipeline(swap_store: StandInStore) -> Iterator[Pipeline]:
    p = Pipeline.from_config(PipelineConfig(swapper="inswapper_128"), swap_store)
    yield p
    p.close()


def test_missing_user_models_give_a_one_line_hint(tmp_path: Path, model_store: ModelStore) -> None:
    store = ModelStore(tmp_path)
    copy_embedded_models(store, model_store)
    with pytest.raises(ModelUnavailable) as err:
        Pipeline.from_config(PipelineConfig(swapper="inswapper_128"), store)
    msg = str(err.value)
    assert "inswapper_128" in msg and "\n" not in msg and str(tmp_path) in msg


def test_emap_is_the_last_initializer(swap_store: StandInStore) -> None:
    emap = load_emap(swap_store.require("inswapper_128"))
    assert emap.shape == (512, 512) and emap.dtype == np.float32


def test_source_latent_is_normalised_and_identity_dependent(
    pipeline: Pipeline, astronaut: np.ndarray, group_photo: np.ndarray
) -> None:
    a = pipeline.prepare_source(astronaut, "a").prepared.latent
    b = pipeline.prepare_source(group_photo, "b").prepared.latent
    assert a.shape == b.shape == (512,)
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-5)
    assert float(a @ b) < 0.999


def test_swaps_every_face_in_one_batch(
    pipeline: Pipeline, astronaut: np.ndarray, group_photo: np.ndarray
) -> None:
    assert isinstance(pipeline.swapper, InswapperSwapper)
    assert pipeline.swapper.engine.batch.max > 1
    src = pipeline.prepare_source(astronaut, "a")
    out = pipeline.process([FrameItem(group_photo, src), FrameItem(astronaut, src)])
    assert [o.faces for o in out] == [6, 1]
    assert out[0].batch_sizes[STAGE_SWAP] == 7 and out[1].batch_sizes[STAGE_SWAP] == 7
    assert out[0].batch_sizes[STAGE_PASTE] == 7
    faces = pipeline.detect([group_photo])[0]
    changed = np.any(out[0].image != group_photo, axis=2)
    allowed = np.zeros_like(changed)
    for f in faces:
        w, h = f.width, f.height
        # the face's region: its mesh's extent (up to ~0.1 past the detector's box on turned faces) grown by
        # masks.REGION_GROW (0.1)
        x1, y1 = max(int(f.box[0] - 0.22 * w), 0), max(int(f.box[1] - 0.22 * h), 0)
        allowed[y1 : int(f.box[3] + 0.22 * h), x1 : int(f.box[2] + 0.22 * w)] = True
        cx, cy = f.kps5[2].astype(int)
        assert changed[cy - 3 : cy + 4, cx - 3 : cx + 4].all(), "the nose area should be swapped"
    assert not (changed & ~allowed).any(), "pixels changed away from every face"


def test_batched_swap_equals_single_swaps(
    pipeline: Pipeline, astronaut: np.ndarray, group_photo: np.ndarray
) -> None:
    src = pipeline.prepare_source(astronaut, "a")
    both = pipeline.process([FrameItem(group_photo, src), FrameItem(astronaut, src)])
    one = pipeline.process([FrameItem(astronaut, src)])[0]
    assert np.abs(both[1].image.astype(np.int16) - one.image.astype(np.int16)).max() <= 1


def test_reference_selector_swaps_the_face_most_like_the_reference(
    swap_store: StandInStore, group_photo: np.ndarray
) -> None:
    """With an embedder installed (the stand-in ArcFace: a projected colour layout), `?faces=reference`
    swaps only the face of t1.jpg whose crop the reference is, and the track keeps its similarity."""
    from engines.frames import FaceSettings, FaceTrack

    p = Pipeline.from_config(PipelineConfig(), swap_store)  # mesh_warp, ArcFace loaded for the selector
    try:
        assert p.supports_reference
        faces = p.detect([group_photo])[0]
        target = sorted(faces, key=lambda f: f.box[0])[2]
        x1, y1, x2, y2 = target.box.astype(int)
        crop = np.ascontiguousarray(group_photo[y1 - 40 : y2 + 40, x1 - 40 : x2 + 40])
        reference = p.prepare_source(crop, "ref")
        source = p.prepare_source(group_photo, "src")
        track = FaceTrack(settings=FaceSettings(selector="reference", reference=reference))
        out = p.process([FrameItem(group_photo, source, track=track)])[0]
        assert out.faces == 1
        changed = np.any(out.image != group_photo, axis=2)
        for f in faces:
            bx1, by1, bx2, by2 = f.box.astype(int)
            touched = changed[by1:by2, bx1:bx2].mean()
            assert touched > 0.3 if f is target else touched == 0.0
        sims = [tf.similarity for tf in track.faces]
        assert all(s is not None for s in sims) and len(sims) == len(faces)
    finally:
        p.close()
