"""The quality report's measurements of one picture setting: kept regions, jitter, seams, masks, cost.

Each function takes the `Study` (bench.quality.study) or a model store and returns plain numbers; the
report (bench.quality.report) calls them in a fixed order and assembles the JSON.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from bench.quality.identity_section import SETTINGS
from bench.quality.study import KEPT, Study, vp8_round_trip
from engines.frames import FaceTrack, FrameItem, SourceFace
from engines.models.store import ModelStore
from engines.processors.alignment import ARCFACE_128_V2, FFHQ_512, estimate_affine
from engines.processors.face_detector import Face
from engines.processors.masks import (
    EYE_LEFT,
    EYE_RIGHT,
    INNER_LIPS,
    BoxMaskConfig,
    box_mask,
    full_strength_share,
    paste_mask,
    region_mask,
    skin_weight,
)
from engines.processors.mesh_warp import MeshWarpSwapper
from engines.processors.paste import face_box_mask
from engines.processors.tracking import OneEuroFilter
from engines.source.prepared import mesh_of
from loadgen.contact_sheet import crop_face
from loadgen.percentiles import percentile

# Mesh points for the geometry proxy: eye corners, nose tip and wings, mouth corners, lip middles, jaw, chin,
# brow middles, forehead top.
GEOMETRY = (33, 133, 362, 263, 1, 98, 327, 61, 291, 13, 14, 234, 454, 172, 397, 152, 105, 334, 10)


def ring_region(
    shape: tuple[int, ...], landmarks: np.ndarray, rings: Sequence[Sequence[int]], erode: int = 1
) -> np.ndarray:
    mask = np.zeros(shape[:2], np.uint8)
    cv2.fillPoly(mask, [np.round(landmarks[list(r)]).astype(np.int32) for r in rings], 255)
    if erode > 0:
        mask = np.asarray(cv2.erode(mask, np.ones((2 * erode + 1,) * 2, np.uint8)))
    return mask > 0


def mean_abs(a: np.ndarray, b: np.ndarray, where: np.ndarray) -> float | None:
    if not where.any():
        return None
    return round(float(np.abs(a.astype(np.int16) - b.astype(np.int16))[where].mean()), 2)


def teeth_share(image: np.ndarray, where: np.ndarray) -> float | None:
    if not where.any():
        return None
    px = image[where].astype(np.float32)
    return round(float(((px.mean(1) > 150) & (px.std(1) < 30)).mean()), 3)


def face_size(landmarks: np.ndarray) -> float:
    return float(max(np.ptp(landmarks[:, 0]), np.ptp(landmarks[:, 1]), 1.0))


def geometry(landmarks: np.ndarray) -> np.ndarray:
    """Pairwise distances between GEOMETRY points, divided by the eye-corner distance."""
    pts = landmarks[list(GEOMETRY)].astype(np.float64)
    d = np.linalg.norm(pts[:, None] - pts[None], axis=2)[np.triu_indices(len(pts), 1)]
    return d / max(float(np.linalg.norm(landmarks[33] - landmarks[263])), 1e-6)


def identity_proxy(result: np.ndarray, target: np.ndarray, source: np.ndarray) -> float:
    """Projection of the result's geometry onto target -> source: 0 = target's geometry, 1 = source's."""
    t, s, r = geometry(target), geometry(source), geometry(result)
    axis = s - t
    return round(float((r - t) @ axis / max(float(axis @ axis), 1e-12)), 3)


def mouth_and_eyes(
    study: Study, targets: dict[str, np.ndarray], source: SourceFace, source_face: Face
) -> tuple[dict[str, Any], dict[str, list[np.ndarray]]]:
    metrics: dict[str, Any] = {}
    tiles: dict[str, list[np.ndarray]] = {}
    for name, image in targets.items():
        # kept regions are the target's own pixels where they were: measured on the target's own shape (the
        # source's shape moves the mouth and eyes; the shape section measures their liveliness there)
        after, face = study.swap(image, source, KEPT, shape=0.0)
        before, _ = study.swap(image, source, (), shape=0.0)
        if face is None or face.landmarks is None:
            metrics[name] = {"error": "no face"}
            continue
        lm = face.landmarks
        mouth = ring_region(image.shape, lm, [INNER_LIPS], erode=1)
        eyes = ring_region(image.shape, lm, [EYE_RIGHT, EYE_LEFT], erode=1)
        res_after = study.mesh(after)
        res_before = study.mesh(before)
        assert source_face.landmarks is not None
        metrics[name] = {
            "inner_mouth_px": int(mouth.sum()),
            "inner_mouth_diff": {
                "before": mean_abs(before, image, mouth),
                "after": mean_abs(after, image, mouth),
            },
            "teeth_share": {
                "target": teeth_share(image, mouth),
                "before": teeth_share(before, mouth),
                "after": teeth_share(after, mouth),
            },
            "eye_diff": {"before": mean_abs(before, image, eyes), "after": mean_abs(after, image, eyes)},
            "identity_proxy": {
                "before": identity_proxy(res_before.landmarks, lm, source_face.landmarks)
                if res_before is not None and res_before.landmarks is not None
                else None,
                "after": identity_proxy(res_after.landmarks, lm, source_face.landmarks)
                if res_after is not None and res_after.landmarks is not None
                else None,
            },
        }
        tiles[name] = [crop_face(x, face) for x in (image, before, after)]
    return metrics, tiles


def jitter_still(
    store: ModelStore, image: np.ndarray, source_image: np.ndarray, frames: int = 45
) -> dict[str, Any]:
    """Identical frames (the codec's output settles) and with camera-like noise (sigma 2 grey levels)."""
    out: dict[str, Any] = {}
    for label, sigma in (("identical_frames", 0.0), ("sensor_noise_sigma2", 2.0)):
        still = vp8_round_trip(image, frames, noise_sigma=sigma)
        out[label] = {"frames": len(still), **trajectories(store, still, source_image, fps=15.0, still=True)}
    return out


def trajectories(
    store: ModelStore, frames: list[np.ndarray], source_image: np.ndarray, fps: float, still: bool
) -> dict[str, Any]:
    """Landmark jitter before (per-frame detection, raw mesh, RetinaFace five points) and after (tracked)."""
    study = Study(store)
    try:
        source = study.pipeline.prepare_source(source_image, "src")
        before_mesh, before_kps, after_mesh, after_kps = [], [], [], []
        track = FaceTrack()
        for k, frame in enumerate(frames):
            faces = study.pipeline.detect([frame])[0]
            if faces:
                f = max(faces, key=lambda f: f.area)
                m = study.pipeline.landmarker.run([(frame, f)])[0]
                before_mesh.append(m.landmarks)
                before_kps.append(f.kps5)
            study.pipeline.process([FrameItem(frame, source, track=track, time_s=k / fps)])
            if track.faces:
                after_mesh.append(track.faces[0].shown.landmarks)
                after_kps.append(track.faces[0].shown.kps5)
        size = face_size(np.asarray(before_mesh[0]))
        measure = still_jitter if still else acceleration
        return {
            "face_px": round(size, 1),
            "mesh468": {"before": measure(before_mesh, size), "after": measure(after_mesh, size)},
            "five_points": {"before": measure(before_kps, size), "after": measure(after_kps, size)},
            "unit": "per mille of face size per frame" + ("" if still else " (acceleration)"),
        }
    finally:
        study.close()


def still_jitter(seq: list[np.ndarray], size: float) -> float:
    arr = np.asarray(seq[3:], dtype=np.float64)  # skip the first frames (the codec and filter settle)
    return round(float(np.linalg.norm(np.diff(arr, axis=0), axis=2).mean()) / size * 1000, 2)


def acceleration(seq: list[np.ndarray], size: float) -> float:
    arr = np.asarray(seq, dtype=np.float64)
    acc = arr[2:] - 2 * arr[1:-1] + arr[:-2]
    return round(float(np.linalg.norm(acc, axis=2).mean()) / size * 1000, 2)


def seams(store: ModelStore, targets: dict[str, np.ndarray], source_image: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for poisson in (False, True):
        study = Study(store, poisson=poisson)
        try:
            source = study.pipeline.prepare_source(source_image, "src")
            for name, image in targets.items():
                # the blend's own seam, on the target's shape (with the source's, the seam is inside the moved
                # window, which is pasted whole)
                result, face = study.swap(image, source, KEPT, shape=0.0)
                if face is None or face.landmarks is None:
                    continue
                patch = MeshWarpSwapper(poisson).swap_one(image, face.landmarks, mesh_of(source), KEPT, 0.0)
                if patch is None:
                    continue
                x0, y0 = -int(patch.matrix[0, 2]), -int(patch.matrix[1, 2])
                h, w = patch.mask.shape
                band = (patch.mask > 0.2) & (patch.mask < 0.8)
                res = cv2.cvtColor(result[y0 : y0 + h, x0 : x0 + w], cv2.COLOR_RGB2GRAY).astype(np.float32)
                tgt = cv2.cvtColor(image[y0 : y0 + h, x0 : x0 + w], cv2.COLOR_RGB2GRAY).astype(np.float32)

                def grad(g: np.ndarray) -> np.ndarray:
                    gx, gy = cv2.Sobel(g, cv2.CV_32F, 1, 0), cv2.Sobel(g, cv2.CV_32F, 0, 1)
                    return np.asarray(np.hypot(gx, gy))

                ratio = float(grad(res)[band].mean() / max(float(grad(tgt)[band].mean()), 1e-6))
                out.setdefault(name, {})["poisson" if poisson else "colour_transfer"] = round(ratio, 3)
        finally:
            study.close()
    out["unit"] = "edge-band gradient, result / target (1 = no seam added)"
    return out


def mask_shares(study: Study, image: np.ndarray) -> dict[str, Any]:
    face = study.mesh(image)
    assert face is not None
    detection = study.pipeline.detect([image])[0][0]
    out: dict[str, Any] = {}
    x0, y0, x1, y1 = face.box.astype(int)
    for size, template, label in ((128, ARCFACE_128_V2, "inswapper_128"), (512, FFHQ_512, "gfpgan_512")):
        m = estimate_affine(face.kps5, template, size, robust=size == 512)
        inv = cv2.invertAffineTransform(m)
        cell: dict[str, Any] = {}
        for name, mask in (
            ("before", face_box_mask(detection.box, m, size, 0.15)),
            ("after", paste_mask(face.box, m, box_mask(size, BoxMaskConfig()))),
        ):
            back = cv2.warpAffine(mask, inv, image.shape[1::-1])
            in_box = float((back[y0:y1, x0:x1] >= 0.99).mean())
            cell[name] = {
                "crop_full_strength_share": round(full_strength_share(mask), 3),
                "face_box_full_strength_share": round(in_box, 3),
            }
        out[label] = cell
    return out


def costs(study: Study, image: np.ndarray, repeats: int = 200) -> dict[str, float]:
    """Per-face cost of the new per-frame work at this image's size (ms, median of `repeats`)."""
    face = study.mesh(image)
    assert face is not None and face.landmarks is not None
    lm = face.landmarks
    lo = np.floor(lm.min(0)).astype(int)
    hi = np.ceil(lm.max(0)).astype(int)
    shape = (int(hi[1] - lo[1]) + 4, int(hi[0] - lo[0]) + 4)
    local = lm - lo + 2
    size = face_size(lm)
    flt = OneEuroFilter(0.05, 20.0, 1.0)

    def timed(fn: Any) -> float:
        ts = []
        for k in range(repeats):
            t0 = time.perf_counter()
            fn(k)
            ts.append((time.perf_counter() - t0) * 1000)
        return round(percentile(ts, 50), 4)

    return {
        "face_px": round(size, 1),
        **{
            f"region_mask_{label}_ms": timed(lambda k, keep=keep: region_mask(shape, local, keep, size))
            for label, keep in SETTINGS.items()
            if keep
        },
        "skin_mask_ms": timed(lambda k: skin_weight(shape, local, size)),  # where skin colour is read
        "one_euro_468_ms": timed(lambda k: flt(lm, k / 15, size)),
    }


def open_mouth_frames(study: Study, frames: list[np.ndarray], n: int = 2) -> list[int]:
    """Indices of the clip's frames whose inner mouth is most open (relative to face size)."""
    scores = []
    for frame in frames:
        face = study.mesh(frame)
        if face is None or face.landmarks is None:
            scores.append(0.0)
            continue
        lm = face.landmarks
        scores.append(float(ring_region(frame.shape, lm, [INNER_LIPS], erode=0).sum()) / face_size(lm) ** 2)
    order = np.argsort(scores)[::-1]
    picked: list[int] = []
    for k in order:  # frames apart, not neighbours
        if all(abs(int(k) - p) > 10 for p in picked):
            picked.append(int(k))
        if len(picked) == n:
            break
    return sorted(picked)
