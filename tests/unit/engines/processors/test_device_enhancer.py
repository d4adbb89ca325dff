"""The enhancer stage on a torch device (CPU torch here; CUDA on a GPU) against the numpy/OpenCV enhancer,
through the real pipeline on real faces, and the batch's one upload and one download. Bounds (0..255):
- "detail": the same boxes touched, nothing outside changed, inside max 1; after the device swap, the swap's
  bound (PSNR >= 38 dB, test_device_mesh_warp.py) through the sharpening's gain (up to 2.2, -7 dB): PSNR
  >= 32 dB, mean under 1.5;
- "gfpgan_1.4" on its stand-in graph (tanh(2x), which doubles any input difference): the same boxes,
  nothing outside changed, inside max 2 and PSNR >= 60 dB (OpenCV's fixed-point bilinear rounds apart);
- the I420 planes the device hands the encoder: max 1 from gateway.media.colour.rgb_to_i420 of the same box;
- "gfpgan_1.4" with `--engine torch`: the crops go to the engine as tensors (`infer_tensors`) and the frame
  equals, bit for bit, the numpy round trip through `infer` (the same module on CPU torch).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
import pytest

import engines.image_stages as image_stages_module
from engines.factory import EngineConfig
from engines.frames import (
    STAGE_ENHANCE,
    STAGE_SWAP,
    Box,
    FaceTrack,
    FrameItem,
    FrameOptions,
    FrameOutput,
)
from engines.models.registry import get_spec
from engines.models.store import ModelStore, sha256_file
from engines.pipeline import Pipeline, PipelineConfig
from engines.processors.device_enhancer import enhance_device
from engines.processors.device_frames import DeviceFrames, Downloaded
from tests.harness.device_checks import changed_only_in_boxes, i420_made_on_the_device
from tests.harness.onnx_graphs import copy_embedded_models, gfpgan_graph

pytest.importorskip("torch")
BOTH = (STAGE_SWAP, STAGE_ENHANCE)
ENHANCE_ONLY = FrameOptions(processors=(STAGE_ENHANCE,))


@pytest.fixture(scope="module")
def frames(media: dict[str, Path], astronaut: np.ndarray, group_photo: np.ndarray) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    with av.open(str(media["carphone_pristine.mp4"])) as c:
        for i, decoded in enumerate(c.decode(video=0)):
            if i % 20 == 0:
                rgb = np.asarray(decoded.to_ndarray(format="rgb24"), dtype=np.uint8)
                out.append(np.asarray(cv2.resize(rgb, (640, 480), interpolation=cv2.INTER_CUBIC)))
            if i == 20:
                break
    return [*out, astronaut, group_photo]


@pytest.fixture(scope="module")
def gfpgan_store(tmp_path_factory: pytest.TempPathFactory, model_store: ModelStore) -> ModelStore:
    store = ModelStore(tmp_path_factory.mktemp("models"))
    copy_embedded_models(store, model_store)
    graph = gfpgan_graph(tmp_path_factory.mktemp("graphs") / "gfpgan.onnx")
    store.add(get_spec("gfpgan_1.4"), graph, sha256_file(graph))
    return store


def _pair(config: PipelineConfig, store: ModelStore) -> Iterator[tuple[Pipeline, Pipeline]]:
    host = Pipeline.from_config(config, store)
    dev = Pipeline.from_config(replace(config, image_device="cpu"), store)
    try:
        assert host.device_enhance is None and dev.device_enhance is not None
        yield host, dev
    finally:
        host.close()
        dev.close()


@pytest.fixture(scope="module")
def detail(model_store: ModelStore) -> Iterator[tuple[Pipeline, Pipeline]]:
    yield from _pair(PipelineConfig(processors=BOTH), model_store)


@pytest.fixture(scope="module")
def gfpgan(gfpgan_store: ModelStore) -> Iterator[tuple[Pipeline, Pipeline]]:
    yield from _pair(PipelineConfig(processors=BOTH, enhancer="gfpgan_1.4", enhancer_blend=1.0), gfpgan_store)


@pytest.fixture(scope="module")
def gfpgan_torch(gfpgan_store: ModelStore) -> Iterator[Pipeline]:
    """Every model on CPU torch (standing in for CUDA), the enhancer's image work on "cpu": the engine's
    device; batches of at most 2, so a frame of several faces also splits and pads."""
    config = PipelineConfig(
        processors=BOTH,
        enhancer="gfpgan_1.4",
        enhancer_blend=1.0,
        image_device="cpu",
        engine=EngineConfig(backend="torch", contexts=1, max_batch=2),
    )
    p = Pipeline.from_config(config, gfpgan_store)
    try:
        yield p
    finally:
        p.close()


def _run(p: Pipeline, frame: np.ndarray, options: FrameOptions, source: object = None) -> FrameOutput:
    return p.process([FrameItem(frame, source, options, FaceTrack(), time_s=0.0)])[0]  # type: ignore[arg-type]


def _psnr(diff: np.ndarray) -> float:
    return float(10 * np.log10(255.0**2 / max(float(np.mean(diff.astype(np.float64) ** 2)), 1e-9)))


def test_detail_enhancer_on_the_device_matches(
    detail: tuple[Pipeline, Pipeline], frames: list[np.ndarray], astronaut: np.ndarray
) -> None:
    host, dev = detail
    source = host.prepare_source(astronaut, "astronaut")
    for frame in frames:
        for options, src in ((ENHANCE_ONLY, None), (FrameOptions(processors=BOTH), source)):
            want, got = _run(host, frame, options, src), _run(dev, frame, options, src)
            assert want.changed_i420 is None  # the CPU path converts on the host, as before
            diff = changed_only_in_boxes(frame, want, got)
            if src is None:
                assert diff.max() <= 1, diff.max()
            else:
                assert _psnr(diff) >= 32 and diff.mean() < 1.5, (_psnr(diff), diff.mean())
            i420_made_on_the_device(got)


def test_gfpgan_on_the_device_matches(gfpgan: tuple[Pipeline, Pipeline], frames: list[np.ndarray]) -> None:
    host, dev = gfpgan
    for frame in frames:
        want, got = _run(host, frame, ENHANCE_ONLY), _run(dev, frame, ENHANCE_ONLY)
        assert got.batch_sizes[STAGE_ENHANCE] == want.batch_sizes[STAGE_ENHANCE] >= 1
        diff = changed_only_in_boxes(frame, want, got)
        assert diff.max() <= 2 and _psnr(diff) >= 60, (_psnr(diff), diff.max())
        i420_made_on_the_device(got)


def test_gfpgan_crops_stay_on_the_torch_engines_device(
    gfpgan: tuple[Pipeline, Pipeline],
    gfpgan_torch: Pipeline,
    frames: list[np.ndarray],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the torch engine on the enhancer's device the crops never pass through numpy (its `infer` is
    made to fail and the stage still runs, through `infer_tensors`), and the frames equal the numpy round
    trip's; a host engine (ONNX Runtime) keeps that round trip."""
    _, ort_dev = gfpgan
    assert ort_dev.device_enhance is not None and ort_dev.device_enhance.tensor_engine is None
    dev = gfpgan_torch.device_enhance
    assert gfpgan_torch.enhancer is not None and dev is not None
    engine = gfpgan_torch.enhancer.engine
    assert dev.tensor_engine is engine
    wants = [_run(gfpgan_torch, f, ENHANCE_ONLY) for f in frames]  # the device path
    monkeypatch.setattr(dev, "tensor_engine", None)  # the numpy round trip, on the same pipeline
    round_trip = [_run(gfpgan_torch, f, ENHANCE_ONLY) for f in frames]
    monkeypatch.undo()

    calls: list[int] = []
    tensors = engine.infer_tensors  # type: ignore[attr-defined]

    def counted(inputs: dict[str, Any]) -> dict[str, Any]:
        calls.append(next(iter(inputs.values())).shape[0])
        return tensors(inputs)  # type: ignore[no-any-return]

    def refuse(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise AssertionError("the GFPGAN crops went through numpy")

    monkeypatch.setattr(engine, "infer", refuse)
    monkeypatch.setattr(engine, "infer_tensors", counted)
    faces = 0
    for frame, want, host in zip(frames, wants, round_trip, strict=True):
        got = _run(gfpgan_torch, frame, ENHANCE_ONLY)
        faces += got.batch_sizes[STAGE_ENHANCE]
        changed_only_in_boxes(frame, host, got)
        assert got.changed == want.changed and np.array_equal(got.image, want.image)
        assert np.array_equal(got.image, host.image)
        i420_made_on_the_device(got)
    assert faces > len(frames) and sum(calls) >= faces and max(calls) <= 2  # every face, in engine batches


class _Counting(DeviceFrames):
    uploads: list[int] = []
    downloads: list[list[int]] = []

    def get(self, key: int) -> Any:
        if key not in self:
            _Counting.uploads.append(key)
        return super().get(key)

    def download(self, touched: Mapping[int, Sequence[Box]], i420: bool = True) -> dict[int, Downloaded]:
        _Counting.downloads.append(sorted(touched))
        return super().download(touched, i420)


def test_swap_and_enhance_share_one_upload_and_one_download(
    detail: tuple[Pipeline, Pipeline],
    astronaut: np.ndarray,
    frames: list[np.ndarray],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, dev = detail
    assert dev.device_swap is not None
    source = dev.prepare_source(astronaut, "astronaut")
    monkeypatch.setattr(image_stages_module, "DeviceFrames", _Counting)
    _Counting.uploads, _Counting.downloads = [], []
    items = [FrameItem(f, source, FrameOptions(processors=BOTH), FaceTrack(), time_s=0.0) for f in frames[:3]]
    outs = dev.process(items)
    assert all(o.changed for o in outs)
    assert sorted(_Counting.uploads) == [0, 1, 2]  # each frame up once, for both stages
    assert _Counting.downloads == [[0, 1, 2]]  # and back once, together
    assert all(o.timings_ms.keys() >= {STAGE_SWAP, STAGE_ENHANCE} for o in outs)


def test_device_frames_leave_the_host_frame_alone_and_skip_i420_for_odd_sizes() -> None:
    import torch

    odd = np.zeros((5, 8, 3), np.uint8)
    even = np.zeros((6, 8, 3), np.uint8)
    host = {0: odd, 1: even}
    frames = DeviceFrames("cpu", host.__getitem__)
    for k in (0, 1):
        frames.get(k)[1:3, 2:4] = 200
    back = frames.download({0: [(2, 1, 4, 3)], 1: [(2, 1, 4, 3), (4, 2, 4, 4)]})
    assert not odd.any() and not even.any()  # the host frames are never written
    assert back[0].regions is None and (back[0].image[1:3, 2:4] == 200).all()
    regions = back[1].regions
    assert regions is not None and regions[1] is None  # an empty box has no planes
    assert regions[0] is not None and regions[0].shape == (6, 2)  # rows 0..4 x cols 2..4, even-widened
    assert torch.equal(frames.get(1), torch.from_numpy(back[1].image))


def test_the_torch_cuda_engine_moves_the_enhancer_to_its_device() -> None:
    assert enhance_device(None, EngineConfig(backend="torch", providers=("cuda",), device_id=1)) == "cuda:1"
    assert enhance_device("cpu", EngineConfig()) == "cpu"
    assert enhance_device(None, EngineConfig()) is None  # the CPU default: numpy/OpenCV
    assert enhance_device(None, EngineConfig(backend="torch")) is None


@pytest.mark.models  # its pipelines come through request.getfixturevalue, outside the fixture closure
@pytest.mark.parametrize("name", ["detail", "gfpgan"])
def test_warmup_runs_the_device_stages_once(
    name: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start-up warm-up takes the device path too (its first kernels and transfers happen there, not on
    the first live frame): the synthetic frame goes up once, is swapped and enhanced, and comes back once."""
    _, dev = request.getfixturevalue(name)
    assert dev.device_enhance is not None
    monkeypatch.setattr(image_stages_module, "DeviceFrames", _Counting)
    _Counting.uploads, _Counting.downloads = [], []
    enhanced: list[int] = []
    enhance = dev.device_enhance.enhance_and_paste

    def counting(frames: DeviceFrames, jobs: list[tuple[int, object]]) -> dict[int, list[tuple[int, ...]]]:
        enhanced.append(len(jobs))
        return enhance(frames, jobs)  # type: ignore[no-any-return]

    monkeypatch.setattr(dev.device_enhance, "enhance_and_paste", counting)
    dev.warmup()
    assert _Counting.uploads == [0] and _Counting.downloads == [[0]] and enhanced == [1]
