"""The swap and enhancer stages' image work on CUDA against the numpy/OpenCV path through the real pipeline,
their one upload and one download per batch, RGB -> I420 on CUDA, and NVENC's H.264. Bounds as in
tests/unit/engines/processors/test_device_enhancer.py, each widened by one grey level for CUDA's own
float rounding: detail enhancer max 2; GFPGAN (stand-in graph) max 3 and PSNR >= 55 dB; swap + enhance PSNR >=
32 dB; I420 max 1 (integer arithmetic after the same float sums) and the boxes' planes max 1 from the host
conversion.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from engines.frames import (
    STAGE_ENHANCE,
    STAGE_SWAP,
    FaceTrack,
    FrameItem,
    FrameOptions,
    FrameOutput,
)
from engines.models.registry import get_spec
from engines.models.store import ModelStore, sha256_file
from engines.pipeline import Pipeline, PipelineConfig
from gateway.media.colour import rgb_to_i420
from tests.harness.device_checks import changed_only_in_boxes, i420_made_on_the_device
from tests.harness.onnx_graphs import copy_embedded_models, gfpgan_graph

BOTH = FrameOptions(processors=(STAGE_SWAP, STAGE_ENHANCE))
ENHANCE_ONLY = FrameOptions(processors=(STAGE_ENHANCE,))


@pytest.fixture(scope="module")
def frames(media: dict[str, Path], astronaut: np.ndarray, group_photo: np.ndarray) -> list[np.ndarray]:
    with av.open(str(media["carphone_pristine.mp4"])) as c:
        rgb = next(iter(c.decode(video=0))).to_ndarray(format="rgb24")
    return [np.asarray(cv2.resize(rgb, (640, 480), interpolation=cv2.INTER_CUBIC)), astronaut, group_photo]


def _pair(config: PipelineConfig, store: ModelStore) -> Iterator[tuple[Pipeline, Pipeline]]:
    host = Pipeline.from_config(config, store)
    dev = Pipeline.from_config(replace(config, image_device="cuda"), store)
    try:
        yield host, dev
    finally:
        host.close()
        dev.close()


def _diff(frame: np.ndarray, want: FrameOutput, got: FrameOutput) -> np.ndarray:
    i420_made_on_the_device(got)
    return changed_only_in_boxes(frame, want, got)


def _psnr(diff: np.ndarray) -> float:
    return float(10 * np.log10(255.0**2 / max(float(np.mean(diff.astype(np.float64) ** 2)), 1e-9)))


@pytest.mark.needs("torch_cuda")
def test_detail_and_swap_on_cuda_match(
    model_store: ModelStore, frames: list[np.ndarray], astronaut: np.ndarray
) -> None:
    for host, dev in _pair(PipelineConfig(processors=(STAGE_SWAP, STAGE_ENHANCE)), model_store):
        assert dev.device_swap is not None and dev.device_enhance is not None
        source = host.prepare_source(astronaut, "astronaut")
        for frame in frames:
            for options, src, check in (
                (ENHANCE_ONLY, None, lambda d: d.max() <= 2),
                (BOTH, source, lambda d: _psnr(d) >= 32),
            ):
                want = host.process([FrameItem(frame, src, options, FaceTrack(), time_s=0.0)])[0]
                got = dev.process([FrameItem(frame, src, options, FaceTrack(), time_s=0.0)])[0]
                d = _diff(frame, want, got)
                assert check(d), (options.processors, d.max(), _psnr(d))


@pytest.mark.needs("torch_cuda")
def test_gfpgan_on_cuda_matches(tmp_path: Path, model_store: ModelStore, frames: list[np.ndarray]) -> None:
    store = ModelStore(tmp_path / "models")
    copy_embedded_models(store, model_store)
    graph = gfpgan_graph(tmp_path / "gfpgan.onnx")
    store.add(get_spec("gfpgan_1.4"), graph, sha256_file(graph))
    config = PipelineConfig(processors=(STAGE_SWAP, STAGE_ENHANCE), enhancer="gfpgan_1.4", enhancer_blend=1.0)
    for host, dev in _pair(config, store):
        for frame in frames:
            want = host.process([FrameItem(frame, None, ENHANCE_ONLY, FaceTrack(), time_s=0.0)])[0]
            got = dev.process([FrameItem(frame, None, ENHANCE_ONLY, FaceTrack(), time_s=0.0)])[0]
            d = _diff(frame, want, got)
            assert d.max() <= 3 and _psnr(d) >= 55, (d.max(), _psnr(d))


@pytest.mark.needs("torch_cuda")
def test_rgb_to_i420_on_cuda(frames: list[np.ndarray]) -> None:
    import torch

    from engines.processors import tensor_ops as T

    for frame in frames:
        even = np.ascontiguousarray(frame[: frame.shape[0] & ~1, : frame.shape[1] & ~1])
        got = T.rgb_to_i420(torch.from_numpy(even).cuda()).cpu().numpy()
        want = rgb_to_i420(even)
        assert want is not None and np.abs(got.astype(int) - want.astype(int)).max() <= 1


@pytest.mark.needs("nvenc")
def test_nvenc_encodes_a_stream_that_decodes(astronaut: np.ndarray) -> None:
    from gateway.media.fanout import FanoutEncoder
    from gateway.webrtc.codecs import hw_encode

    said: list[str] = []
    choice = hw_encode.detect()
    assert choice.hardware, choice.reason
    hardware = hw_encode.HardwareH264(choice, said.append)
    enc = FanoutEncoder(bitrate=2_000_000, codec="H264", hardware_h264=hardware)
    image = cv2.resize(astronaut, (640, 360), interpolation=cv2.INTER_AREA)
    packets = []
    for i in range(10):
        if i == 6:
            enc.request_keyframe()
        packets.append(enc.encode(np.roll(image, 4 * i, axis=1), i * 3000))
    assert enc.encoder_name == "h264_nvenc" and not said and choice.fallbacks == 0
    assert packets[0][0].is_keyframe and any(p.is_keyframe for p in packets[6])
    dec = av.CodecContext.create("h264", "r")
    decoded = [f for ps in packets for p in ps for f in dec.decode(av.Packet(bytes(p)))]  # type: ignore[attr-defined]
    assert len(decoded) == 10
    assert cv2.PSNR(decoded[-1].to_ndarray(format="rgb24"), np.roll(image, 36, axis=1)) > 30
