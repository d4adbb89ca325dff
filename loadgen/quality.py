"""Quality report: what the swapped face looks like on air, measured before and after each picture fix.

`python -m loadgen.quality` runs the real pipeline (RetinaFace + FaceMesh + mesh_warp, weight-free) on the
provisioned media and writes `reports/quality.png` (contact sheet: source | target | result per mask setting)
and `reports/quality.json`: mouth and eye differences to the target (0 = kept) and the inner mouth's teeth
share; landmark jitter of a still face through VP8 and acceleration on the carphone clip (per mille of the
face size; "before" = per-frame detection, "after" = tracked); the seam's gradient against the target's; the
paste masks' full-strength share; identity (a geometry proxy, and with `livefuse[quality]` dlib's embedder:
centred cosine to source and target) and liveliness (loadgen.identity_study); each mask's cost per face.
Only `main` prints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np

from engines.frames import FACE_SHAPE, KEPT_REGIONS, FaceSettings, FaceTrack, FrameItem, SourceFace
from engines.models.store import ModelStore, ModelUnavailable, default_model_dir
from engines.pipeline import Pipeline, PipelineConfig
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
    skin_mask,
)
from engines.processors.mesh_warp import MeshWarpSwapper
from engines.processors.paste import face_box_mask
from engines.processors.tracking import OneEuroFilter, TrackingConfig, measured
from loadgen.contact_sheet import caption, contact_sheet, crop_face, webcam_frame
from loadgen.identity import FaceRecognizer, IdentityUnavailable
from loadgen.identity_study import DEFAULT, SETTINGS, identity_cases, liveliness, reference_mean, verdict
from loadgen.media import MediaUnavailable, default_media_dir, media_path
from loadgen.percentiles import percentile
from loadgen.shape_study import COLUMNS, shape_cases, summary, swap_cost, with_shape_of
from loadgen.shape_study import geometry as shape_geometry_of

KEPT = KEPT_REGIONS
HELD_OUT = ("obama", "obama2", "biden")  # faces no test or tuning of the swap was written against
# Mesh points for the geometry proxy: eye corners, nose tip and wings, mouth corners, lip middles, jaw, chin,
# brow middles, forehead top.
GEOMETRY = (33, 133, 362, 263, 1, 98, 327, 61, 291, 13, 14, 234, 454, 172, 397, 152, 105, 334, 10)


def read_rgb(path: Path) -> np.ndarray:
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise MediaUnavailable(f"{path} is not a readable image")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def clip_frames(path: Path, size: tuple[int, int] | None = None) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    return [cv2.resize(f, size, interpolation=cv2.INTER_CUBIC) for f in frames] if size else frames


def vp8_round_trip(
    image: np.ndarray, frames: int, bitrate: int = 300_000, noise_sigma: float = 0.0
) -> list[np.ndarray]:
    """The same image encoded and decoded `frames` times by libvpx (realtime, as the gateway's encoder),
    optionally with fresh Gaussian noise per frame (a camera's sensor noise)."""
    rng = np.random.default_rng(0)
    h, w = image.shape[:2]
    enc = av.CodecContext.create("libvpx", "w")
    enc.width, enc.height, enc.pix_fmt, enc.bit_rate = w, h, "yuv420p", bitrate
    enc.options = {"deadline": "realtime", "cpu-used": "8", "lag-in-frames": "0"}
    dec = av.CodecContext.create("vp8", "r")
    out: list[np.ndarray] = []
    for k in range(frames):
        noisy = (
            image
            if noise_sigma <= 0
            else np.clip(image.astype(np.float32) + rng.normal(0, noise_sigma, image.shape), 0, 255).astype(
                np.uint8
            )
        )
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(noisy), format="rgb24")
        frame.pts = k
        for packet in enc.encode(frame):  # type: ignore[attr-defined]
            out.extend(d.to_ndarray(format="rgb24") for d in dec.decode(packet))  # type: ignore[attr-defined]
    return out


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


class Study:
    """The pipeline and the helpers the measurements share."""

    def __init__(
        self,
        store: ModelStore,
        keep: tuple[str, ...] = KEPT,
        poisson: bool = False,
        tracking: TrackingConfig | None = None,
        shape: float = FACE_SHAPE,
    ) -> None:
        config = PipelineConfig(keep_regions=keep, poisson=poisson, tracking=tracking or TrackingConfig())
        self.pipeline = Pipeline.from_config(config, store)
        self.shape = shape

    def close(self) -> None:
        self.pipeline.close()

    def mesh(self, image: np.ndarray, pick: str = "largest") -> Face | None:
        faces = self.pipeline.detect([image])[0]
        if not faces:
            return None
        face = max(faces, key=lambda f: f.area) if pick == "largest" else faces[0]
        m = self.pipeline.landmarker.run([(image, face)])[0]
        return measured(face, m.landmarks, m.presence) if self.pipeline.landmarker.is_face(m) else None

    def swap(
        self, image: np.ndarray, source: SourceFace, keep: tuple[str, ...], shape: float | None = None
    ) -> tuple[np.ndarray, Face | None]:
        alpha = self.shape if shape is None else shape
        track = FaceTrack(settings=FaceSettings(keep_regions=keep, selector="one", shape=alpha))
        out = self.pipeline.process([FrameItem(image, source, track=track, time_s=0.0)])[0]
        return out.image, (track.faces[0].shown if track.faces else None)


def clip_outputs(
    study: Study,
    frames: Sequence[np.ndarray],
    source: SourceFace,
    keep: tuple[str, ...],
    fps: float,
    shape: float | None = None,
) -> list[tuple[np.ndarray, Face | None]]:
    """The clip through the tracked pipeline, one session keeping `keep` (and taking `shape` of the source's
    face shape, default the study's): each output and its face."""
    alpha = study.shape if shape is None else shape
    track = FaceTrack(settings=FaceSettings(keep_regions=keep, selector="one", shape=alpha))
    out: list[tuple[np.ndarray, Face | None]] = []
    for k, frame in enumerate(frames):
        result = study.pipeline.process([FrameItem(frame, source, track=track, time_s=k / fps)])[0]
        out.append((result.image, track.faces[0].shown if track.faces else None))
    return out


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
        measure = _still_jitter if still else _acceleration
        return {
            "face_px": round(size, 1),
            "mesh468": {"before": measure(before_mesh, size), "after": measure(after_mesh, size)},
            "five_points": {"before": measure(before_kps, size), "after": measure(after_kps, size)},
            "unit": "per mille of face size per frame" + ("" if still else " (acceleration)"),
        }
    finally:
        study.close()


def _still_jitter(seq: list[np.ndarray], size: float) -> float:
    arr = np.asarray(seq[3:], dtype=np.float64)  # skip the first frames (the codec and filter settle)
    return round(float(np.linalg.norm(np.diff(arr, axis=0), axis=2).mean()) / size * 1000, 2)


def _acceleration(seq: list[np.ndarray], size: float) -> float:
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
                patch = MeshWarpSwapper(poisson).swap_one(
                    image, face.landmarks, source.data["mesh_warp"], KEPT, 0.0
                )
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
        "skin_mask_ms": timed(lambda k: skin_mask(shape, local, size)),
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


def run(store: ModelStore, media_root: Path, recognizer: FaceRecognizer) -> tuple[dict[str, Any], np.ndarray]:
    astronaut = read_rgb(media_path(media_root, "astronaut.png"))
    group = read_rgb(media_path(media_root, "t1.jpg"))
    carphone = clip_frames(media_path(media_root, "carphone_pristine.mp4"), (352, 288))
    fps = 30000 / 1001
    study = Study(store)
    poisson = Study(store, poisson=True)
    try:
        held = {n: held_out(study, read_rgb(media_path(media_root, f"{n}.jpg"))) for n in HELD_OUT}
        faces = study.pipeline.detect([group])[0]
        left = min(faces, key=lambda f: f.box[0])  # closed mouth, looking at the camera
        x1, y1, x2, y2 = left.box.astype(int)
        source_image = np.ascontiguousarray(group[max(y1 - 60, 0) : y2 + 60, max(x1 - 60, 0) : x2 + 60])
        source = study.pipeline.prepare_source(source_image, "t1-left")
        source_face = source.data["face"]
        laughing = max(faces, key=lambda f: f.box[1])  # the laughing man at the table, teeth showing
        lx1, ly1, lx2, ly2 = laughing.box.astype(int)
        pad = int(0.6 * (lx2 - lx1))
        group_target = np.ascontiguousarray(
            group[max(ly1 - pad, 0) : ly2 + pad, max(lx1 - pad, 0) : lx2 + pad]
        )
        picked = open_mouth_frames(study, carphone)
        targets = {"astronaut": astronaut, "t1 laughing": group_target}
        targets.update({f"carphone #{k}": carphone[k] for k in picked})
        regions, _ = mouth_and_eyes(study, targets, source, source_face)
        # Identity: the report's source on every target, a held-out source on every other person, and the
        # group photo's four other people, each the source on the next (unseen by every choice made).
        others = {
            f"t1 #{k + 1}": face_crop(group, f.box)
            for k, f in enumerate(
                sorted((f for f in faces if f is not left and f is not laughing), key=lambda f: f.box[0])
            )
        }
        all_targets = {**targets, "biden": held["biden"], "obama": held["obama"], **others}
        sources = {
            "t1 left": (source_image, source),
            "obama2": (held["obama2"], study.pipeline.prepare_source(held["obama2"], "obama2")),
        }
        sources.update({n: (img, study.pipeline.prepare_source(img, n)) for n, img in others.items()})
        pairs = [("t1 left", t) for t in all_targets if t not in others]
        pairs += [("obama2", t) for t in all_targets if t != "obama" and t not in others]
        unseen = list(others)
        new_pairs = [(unseen[k], unseen[(k + 1) % len(unseen)]) for k in range(len(unseen))]
        pairs += new_pairs
        # the wrong-shape control: each source's pixels on another source's shape
        names = list(sources)
        controls = {
            name: with_shape_of(sources[name][1], sources[names[(k + 1) % len(names)]][1])
            for k, name in enumerate(names)
        }
        mean, population = reference_mean(
            recognizer,
            [(group, f.box) for f in faces]
            + [(astronaut, None), (carphone[0], None), (held["obama"], None), (held["biden"], None)],
        )
        crops: dict[str, dict[str, np.ndarray]] = {}

        def keep_tile(case: str, label: str, result: np.ndarray, face: Face) -> None:
            crops.setdefault(case, {})[label] = crop_face(result, face)

        cases = identity_cases(recognizer, mean, study.swap, sources, all_targets, pairs)
        by_shape = shape_cases(recognizer, mean, study.swap, sources, controls, all_targets, pairs, keep_tile)
        source_emb = _embed(recognizer, source_image)
        clip = liveliness(
            recognizer,
            mean,
            carphone,
            lambda keep: clip_outputs(study, carphone, source, keep, fps),
            study.mesh,
            source_emb,
        )
        clip_flat = liveliness(
            recognizer,
            mean,
            carphone,
            lambda keep: clip_outputs(study, carphone, source, keep, fps, shape=0.0),
            study.mesh,
            source_emb,
            settings={DEFAULT: KEPT},
        )
        outputs = clip_outputs(study, carphone, source, KEPT, fps)
        shape_geometry = shape_geometry_of(outputs, carphone, source, _acceleration)
        rows: dict[str, tuple[np.ndarray, list[np.ndarray]]] = {}
        source_tiles = {name: crop_face(img, _face(study, img)) for name, (img, _) in sources.items()}
        psources = {name: poisson.pipeline.prepare_source(img, name) for name, (img, _) in sources.items()}
        shown = COLUMNS
        for sname, tname in pairs:
            case = f"{sname} -> {tname}"
            cell = by_shape.get(case, {})
            timage = all_targets[tname]
            tface = _face(study, timage)
            if case not in crops or any(lab not in crops[case] for lab in shown) or tface is None:
                continue
            presult, pface = poisson.swap(timage, psources[sname], KEPT)
            tiles = [caption(crop_face(timage, tface), tname)]
            for label in shown:
                sc = cell.get(label, {})
                text = f"src {sc['cos_source']:.2f} tgt {sc['cos_target']:.2f}" if "margin" in sc else "-"
                tiles.append(caption(crops[case][label], text))
            ptile = crop_face(presult, pface) if pface is not None else np.zeros_like(tiles[0][:-20])
            tiles.append(caption(ptile, "Poisson blend"))
            rows[case] = (caption(source_tiles[sname], sname), tiles)
        masks = mask_shares(study, astronaut)
        small = cv2.resize(astronaut, (320, 320))[40:280]
        broadcast = np.zeros((360, 640, 3), np.uint8)
        broadcast[:, 140:500] = cv2.resize(astronaut, (360, 360), interpolation=cv2.INTER_AREA)
        cost: dict[str, Any] = {"320x240": costs(study, small), "640x360": costs(study, broadcast)}
        wide = [cv2.resize(carphone[k], (640, 360), interpolation=cv2.INTER_CUBIC) for k in (0, 40, 80)]
        timed_faces = [
            (img, face.landmarks)
            for img in (broadcast, *wide)
            if (face := study.mesh(img)) is not None and face.landmarks is not None
        ]
        cost["640x360_swap"] = swap_cost(timed_faces, source)
    finally:
        study.close()
        poisson.close()
    still = jitter_still(store, cv2.resize(astronaut, (320, 320))[40:280], source_image)
    jitter_clip = {
        "frames": len(carphone),
        "size": "352x288 (2x)",
        **trajectories(store, carphone, source_image, fps=fps, still=False),
    }
    seam = seams(store, {k: v for k, v in targets.items() if not k.startswith("carphone")}, source_image)
    metrics = {
        "source": "t1.jpg, leftmost face (closed mouth, eyes cast down)",
        "settings": {
            "before": "mask regions none (the source's mouth and eyes over the target's)",
            "after": f"mask regions {','.join(KEPT)} (the default)",
        },
        "regions": regions,
        "identity": {
            "model": "dlib_face_recognition_resnet_model_v1 (dlib 20, CC0 / public domain; PyPI "
            "face-recognition-models 0.3.0), dlib HOG detector + 5-point aligner",
            "cosine": "centred: descriptors minus the reference faces' mean (1 = same face, ~0 = strangers)",
            "reference": population,
            "settings": {label: list(keep) for label, keep in SETTINGS.items()},
            "cases": cases,
            "default": verdict(cases),
            "new_pairs": [f"{s} -> {t}" for s, t in new_pairs],
            "default_on_new_pairs": verdict(
                {f"{s} -> {t}": cases[f"{s} -> {t}"] for s, t in new_pairs if f"{s} -> {t}" in cases}
            ),
        },
        "shape": {
            "default": FACE_SHAPE,
            "columns": {
                "target_shape": "shape 0: the target's face shape",
                "source_shape": "shape 1 (the default): the source's",
                "wrong_shape": "shape 1 with another source's 3-D shape (control)",
            },
            "kept_regions": list(KEPT),
            "cases": by_shape,
            "summary": summary(by_shape),
            "summary_new_pairs": summary(
                {f"{s} -> {t}": by_shape[f"{s} -> {t}"] for s, t in new_pairs if f"{s} -> {t}" in by_shape}
            ),
            "carphone": shape_geometry,
            "liveliness_carphone_shape_0": clip_flat,
        },
        "liveliness_carphone": clip,
        "jitter_still_vp8": still,
        "jitter_carphone": jitter_clip,
        "seam": seam,
        "paste_masks": masks,
        "cost_per_face": cost,
    }
    columns = (
        "target",
        "before: target's shape",
        "after: source's (default)",
        "another's shape (control)",
        "default, Poisson",
    )
    return metrics, contact_sheet(rows, columns)


def face_crop(image: np.ndarray, box: np.ndarray, pad: float = 0.5) -> np.ndarray:
    """The face at `box` with `pad` of its width around it (a group photo's neighbours stay out)."""
    x1, y1, x2, y2 = box.astype(int)
    p = int(pad * (x2 - x1))
    return np.ascontiguousarray(image[max(y1 - p, 0) : y2 + p, max(x1 - p, 0) : x2 + p])


def held_out(study: Study, image: np.ndarray) -> np.ndarray:
    """A held-out photo as a 640x360 webcam frame around its largest face."""
    faces = study.pipeline.detect([image])[0]
    if not faces:
        raise MediaUnavailable("no face found in a held-out photo")
    return webcam_frame(image, max(faces, key=lambda f: f.area).box)


def _face(study: Study, image: np.ndarray) -> Face:
    face = study.mesh(image)
    if face is None:
        raise MediaUnavailable("no face found in a quality-report image")
    return face


def _embed(recognizer: FaceRecognizer, image: np.ndarray) -> np.ndarray:
    e = recognizer.embed(image)
    if e is None:
        raise MediaUnavailable("the identity measure found no face in the source")
    return e


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m loadgen.quality",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out-dir", type=Path, default=Path("reports"))
    p.add_argument("--media-dir", type=Path)
    p.add_argument("--model-dir", type=Path)
    args = p.parse_args(argv)
    store = ModelStore(args.model_dir or default_model_dir(os.environ))
    try:
        metrics, sheet = run(store, args.media_dir or default_media_dir(os.environ), FaceRecognizer())
    except (ModelUnavailable, MediaUnavailable, IdentityUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    png, js = args.out_dir / "quality.png", args.out_dir / "quality.json"
    cv2.imwrite(str(png), cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    js.write_text(json.dumps(metrics, indent=2) + "\n")
    print(json.dumps(metrics, indent=2))
    print(f"contact sheet: {png}\nmetrics: {js}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
