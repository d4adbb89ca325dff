"""The neural path's numbers against the published reference code: no real weights run here, and a stand-in
model cannot tell a wrong template or a swapped colour order, so the numbers are pinned to the sources.

- InsightFace (github.com/deepinsight/insightface, commit 7fadd420c2351d0ffa8cac403421c1a3ed733365):
  python-package/insightface/utils/face_align.py (`arcface_dst`, `estimate_norm`: the 128 crop is the 112
  template shifted 8 px right; a least-squares Umeyama fit), model_zoo/arcface_onnx.py (mean = std = 127.5,
  RGB), model_zoo/inswapper.py (mean 0, std 255, RGB; `latent = normed_embedding @ emap`, normalised).
- FaceFusion (github.com/facefusion/facefusion, commit 33cc6b40a4a538023e12893a0439ce5062e56e36):
  facefusion/face_helper.py (`WARP_TEMPLATE_SET`; estimateAffinePartial2D with RANSAC, threshold 100),
  facefusion/processors/modules/face_enhancer/core.py (GFPGAN: RGB, (x / 255 - 0.5) / 0.5; back: clip to
  [-1, 1], (x + 1) / 2 * 255).
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest

from engines.engine import BatchRange, TensorSpec
from engines.processors.alignment import (
    ARCFACE_112_V2,
    ARCFACE_128_V2,
    FFHQ_512,
    estimate_affine,
    similarity_lstsq,
    warp_crop,
)
from engines.processors.arcface import ArcFaceEmbedder
from engines.processors.face_detector import Face
from engines.processors.face_enhancer import GfpganEnhancer
from engines.processors.inswapper import InswapperSwapper

# InsightFace face_align.py `arcface_dst` (pixels of the 112 crop): left eye, right eye (image left, right),
# nose tip, mouth left, mouth right
ARCFACE_DST = np.array(
    [[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366], [41.5493, 92.3655], [70.7299, 92.2041]]
)
# FaceFusion face_helper.py WARP_TEMPLATE_SET (normalised to the crop)
FF_ARCFACE_112_V2 = np.array(
    [
        [0.34191607, 0.46157411],
        [0.65653393, 0.45983393],
        [0.50022500, 0.64050536],
        [0.37097589, 0.82469196],
        [0.63151696, 0.82325089],
    ]
)
FF_ARCFACE_128 = np.array(
    [
        [0.36167656, 0.40387734],
        [0.63696719, 0.40235469],
        [0.50019687, 0.56044219],
        [0.38710391, 0.72160547],
        [0.61507734, 0.72034453],
    ]
)
FF_FFHQ_512 = np.array(
    [
        [0.37691676, 0.46864664],
        [0.62285697, 0.46912813],
        [0.50123859, 0.61331904],
        [0.39308822, 0.72541100],
        [0.61150205, 0.72490465],
    ]
)


def test_the_crop_templates_are_the_published_ones() -> None:
    assert np.allclose(ARCFACE_112_V2, FF_ARCFACE_112_V2, atol=1e-7)
    assert np.allclose(ARCFACE_128_V2, FF_ARCFACE_128, atol=1e-7)
    assert np.allclose(FFHQ_512, FF_FFHQ_512, atol=1e-7)
    # InsightFace's own construction: 112 as is, 128 = the 112 template shifted 8 px right (estimate_norm)
    assert np.allclose(ARCFACE_112_V2 * 112, ARCFACE_DST, atol=1e-4)
    assert np.allclose(ARCFACE_128_V2 * 128, ARCFACE_DST + (8.0, 0.0), atol=1e-4)


@pytest.mark.parametrize("template", [ARCFACE_112_V2, ARCFACE_128_V2, FFHQ_512])
def test_the_five_points_come_in_the_published_order(template: np.ndarray) -> None:
    """Eye, eye, nose, mouth corner, mouth corner; image left before image right in each pair."""
    (le, re, nose, ml, mr) = template
    assert le[0] < nose[0] < re[0] and ml[0] < nose[0] < mr[0]
    assert max(le[1], re[1]) < nose[1] < min(ml[1], mr[1])
    assert le[0] < 0.5 < re[0] and ml[0] < 0.5 < mr[0]


def _umeyama(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """skimage.transform.SimilarityTransform.estimate (Umeyama 1991, no reflection): 2x3."""
    mu_s, mu_d = src.mean(0), dst.mean(0)
    xs, xd = src - mu_s, dst - mu_d
    cov = xd.T @ xs / len(src)
    u, s, vt = np.linalg.svd(cov)
    d = np.ones(2)
    if np.linalg.det(cov) < 0:
        d[-1] = -1.0
    rot = u @ np.diag(d) @ vt
    scale = float((s * d).sum() / (xs**2).sum() * len(src))
    t = mu_d - scale * rot @ mu_s
    return np.hstack([scale * rot, t[:, None]])


def test_the_similarity_fit_is_the_least_squares_one() -> None:
    # a known similarity (scale 1.7, 12 degrees, a shift) is recovered exactly...
    a = np.deg2rad(12.0)
    known = np.array([[1.7 * np.cos(a), -1.7 * np.sin(a), 31.0], [1.7 * np.sin(a), 1.7 * np.cos(a), -7.5]])
    src = ARCFACE_DST * 1.3 + (200.0, 120.0)
    dst = src @ known[:, :2].T + known[:, 2]
    assert np.allclose(similarity_lstsq(src, dst), known, atol=1e-4)
    # ...and with noise on the points, it is Umeyama's (InsightFace's skimage fit), and FaceFusion's RANSAC
    # with its 100 px threshold keeps all five points and lands on the same fit
    rng = np.random.default_rng(3)
    for _ in range(20):
        kps = src + rng.normal(0.0, 2.0, src.shape)
        for template, size in ((ARCFACE_112_V2, 112), (ARCFACE_128_V2, 128), (FFHQ_512, 512)):
            ours = estimate_affine(kps.astype(np.float32), template, size)
            ref = _umeyama(kps, template.astype(np.float64) * size)
            assert np.allclose(ours, ref, atol=1e-3 * size)
            ff, inliers = cv2.estimateAffinePartial2D(
                kps.astype(np.float32),
                (template * size).astype(np.float32),
                method=cv2.RANSAC,
                ransacReprojThreshold=100,
            )
            assert inliers.all() and np.allclose(ff, ref, atol=2e-3 * size)


class _Recorder:
    """An engine that records its inputs and returns fixed outputs."""

    def __init__(self, inputs: tuple[str, ...], make: Any) -> None:
        self._inputs = tuple(TensorSpec(n, "float32", (None,)) for n in inputs)
        self.make = make
        self.seen: dict[str, np.ndarray] = {}

    name = "recorder"

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return (TensorSpec("out", "float32", (None,)),)

    @property
    def batch(self) -> BatchRange:
        return BatchRange(1, 8)

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.seen = {k: v.copy() for k, v in inputs.items()}
        return {"out": self.make(inputs)}

    def close(self) -> None:
        pass


def _frame_and_points() -> tuple[np.ndarray, np.ndarray]:
    """A frame whose colour channels differ (R ramps across, G down, B constant) and five points."""
    h, w = 360, 640
    frame = np.zeros((h, w, 3), np.uint8)
    frame[..., 0] = (np.arange(w) * 255 // (w - 1))[None, :]
    frame[..., 1] = (np.arange(h) * 255 // (h - 1))[:, None]
    frame[..., 2] = 40
    kps = (ARCFACE_DST * 1.5 + (250.0, 80.0)).astype(np.float32)
    return frame, kps


def test_arcface_input_is_rgb_centred_on_127_5_and_its_output_unit_length() -> None:
    frame, kps = _frame_and_points()
    engine = _Recorder(
        ("input.1",), lambda x: np.tile(np.arange(1.0, 513.0, dtype=np.float32), (len(x["input.1"]), 1))
    )
    out = ArcFaceEmbedder(engine).embed([(frame, kps)])  # type: ignore[arg-type]
    crop = warp_crop(frame, estimate_affine(kps, ARCFACE_112_V2, 112), 112).astype(np.float32)
    blob = engine.seen["input.1"][0]
    assert blob.shape == (3, 112, 112)
    assert np.allclose(blob, (crop.transpose(2, 0, 1) - 127.5) / 127.5, atol=1e-6)
    assert np.allclose(blob[2], (40 - 127.5) / 127.5)  # channel 2 is blue: RGB, as swapRB=True gives
    assert np.linalg.norm(out[0]) == pytest.approx(1.0)


def test_inswapper_input_is_rgb_over_255_and_the_latent_goes_through_emap() -> None:
    frame, kps = _frame_and_points()
    rng = np.random.default_rng(5)
    emap = rng.normal(0.0, 1.0, (512, 512)).astype(np.float32)
    embedding = rng.normal(0.0, 1.0, 512).astype(np.float32)
    arc = _Recorder(("input.1",), lambda x: np.tile(embedding, (len(x["input.1"]), 1)))
    swap_engine = _Recorder(("target", "source"), lambda x: np.full_like(x["target"], 0.25))
    swapper = InswapperSwapper(swap_engine, ArcFaceEmbedder(arc), emap)  # type: ignore[arg-type]
    latent = swapper.source_latent(frame, kps)
    normed = embedding / np.linalg.norm(embedding)
    want = normed @ emap
    assert np.allclose(latent, want / np.linalg.norm(want), atol=1e-5)
    face = Face(box=np.array([250, 80, 420, 260], np.float32), score=0.9, kps5=kps * 1.0)
    (patch,) = swapper.swap([(frame, face, latent)])
    crop = warp_crop(frame, estimate_affine(kps, ARCFACE_128_V2, 128), 128).astype(np.float32)
    target = swap_engine.seen["target"][0]
    assert np.allclose(target, crop.transpose(2, 0, 1) / 255.0, atol=1e-6)  # no mean, RGB
    assert np.allclose(target[2], 40 / 255.0)
    assert np.allclose(swap_engine.seen["source"][0], latent)
    assert np.allclose(patch.image, 0.25 * 255.0)  # the output back: x 255, RGB


def test_gfpgan_input_is_rgb_in_minus_one_to_one_and_its_output_comes_back() -> None:
    frame, kps = _frame_and_points()
    engine = _Recorder(("input",), lambda x: np.clip(x["input"] * 1.5, -3.0, 3.0))
    face = Face(box=np.array([250, 80, 420, 260], np.float32), score=0.9, kps5=kps * 1.0)
    (patch,) = GfpganEnhancer(engine).enhance([(frame, face)])  # type: ignore[arg-type]
    m = estimate_affine(kps, FFHQ_512, 512, robust=True)
    crop = warp_crop(frame, m, 512).astype(np.float32)
    blob = engine.seen["input"][0]
    assert np.allclose(blob, (crop.transpose(2, 0, 1) / 255.0 - 0.5) / 0.5, atol=1e-5)
    assert np.allclose(blob[2], (40 / 255.0 - 0.5) / 0.5, atol=1e-6)
    assert patch is not None
    back = (np.clip(blob * 1.5, -1.0, 1.0) + 1.0) / 2.0 * 255.0
    assert np.allclose(patch.image, back.transpose(1, 2, 0), atol=1e-3)
