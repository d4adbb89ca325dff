"""The swap stage on a torch device (CPU torch here; CUDA on a GPU) against the numpy/OpenCV path, through the
real pipeline on real faces: the same boxes touched, nothing changed outside them, and inside them within
PSNR >= 38 dB and a mean absolute difference under 1 grey level (the two paths differ only where pixels sit on
mask and polygon edges, and by OpenCV's fixed-point interpolation)."""

from __future__ import annotations

from dataclasses import replace

import av
import cv2
import numpy as np
import pytest

from engines.factory import EngineConfig
from engines.frames import FaceTrack, FrameItem, SourceFace
from engines.models.store import ModelStore
from engines.pipeline import Pipeline, PipelineConfig, image_device_of

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def frames(media: dict[str, object], astronaut: np.ndarray) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    with av.open(str(media["carphone_pristine.mp4"])) as c:
        for i, decoded in enumerate(c.decode(video=0)):
            if i % 15 == 0:
                rgb = np.asarray(decoded.to_ndarray(format="rgb24"), dtype=np.uint8)
                out.append(np.asarray(cv2.resize(rgb, (640, 480), interpolation=cv2.INTER_CUBIC)))
            if i == 44:
                break
    return [*out, astronaut]


def test_device_swap_matches_the_numpy_path(
    model_store: ModelStore, frames: list[np.ndarray], astronaut: np.ndarray
) -> None:
    cpu = Pipeline.from_config(PipelineConfig(), model_store)
    dev = Pipeline.from_config(PipelineConfig(image_device="cpu"), model_store)
    try:
        assert cpu.device_swap is None and dev.device_swap is not None
        source: SourceFace = cpu.prepare_source(astronaut, "astronaut")
        a, b = FaceTrack(), FaceTrack()  # one session each: the brows' running rest travels with the job
        for k, frame in enumerate(frames):
            (want,) = cpu.process([FrameItem(frame, source, track=a, time_s=0.5 * k)])
            (got,) = dev.process([FrameItem(frame, source, track=b, time_s=0.5 * k)])
            assert want.changed and got.changed == want.changed
            outside = np.ones(frame.shape[:2], bool)
            for x0, y0, x1, y1 in want.changed:
                outside[y0:y1, x0:x1] = False
            assert (got.image[outside] == frame[outside]).all()
            inside = ~outside
            diff = np.abs(got.image.astype(np.int16) - want.image.astype(np.int16))[inside]
            mse = float(np.mean(diff.astype(np.float64) ** 2))
            psnr = 10 * np.log10(255.0**2 / max(mse, 1e-9))
            assert psnr >= 38 and diff.mean() < 1.0, (psnr, diff.mean())
            assert got.image is not frame and (got.image[inside] != frame[inside]).any()
    finally:
        cpu.close()
        dev.close()


def test_the_torch_cuda_engine_moves_the_image_work_to_its_device() -> None:
    cuda = PipelineConfig(engine=EngineConfig(backend="torch", providers=("cuda",), device_id=1))
    assert image_device_of(cuda) == "cuda:1"
    assert image_device_of(replace(cuda, poisson=True)) is None  # seamlessClone stays on the CPU
    assert image_device_of(PipelineConfig()) is None
    assert image_device_of(PipelineConfig(engine=EngineConfig(backend="torch"))) is None  # torch on the CPU
