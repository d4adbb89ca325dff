"""How steady the GFPGAN 512 crop is on video, by the fit that places it: least squares over the five points,
LMEDS, and RANSAC with FaceFusion's 100 px threshold (`cv2.estimateAffinePartial2D`).

Why: the crop's frame moves with the fit; a robust fit that drops a point on one frame and not the next
makes the crop (and the enhanced face pasted back) jump. On the talking clip (carphone, 2x), with the
detector's five points per frame (raw) and with the tracked ones the pipeline uses: the crop's four corners
mapped back to the frame, their mean acceleration (per mille of the face size per frame), and on how many
frames the fit left a point out.

    .venv/bin/python -m bench.crop_jitter --output reports/bench_crop_jitter.json
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from bench.quality.study import clip_frames
from engines.frames import FaceTrack, FrameItem
from engines.models.store import ModelStore, default_model_dir
from engines.pipeline import Pipeline, PipelineConfig
from engines.processors.alignment import FFHQ_512, similarity_lstsq
from loadgen.media import default_media_dir, media_path

SIZE = 512
METHODS = ("least_squares", "lmeds", "ransac_100")


def fit(kps: np.ndarray, method: str) -> tuple[np.ndarray, int]:
    """The frame -> crop similarity and how many of the five points it kept."""
    dst = (FFHQ_512 * SIZE).astype(np.float32)
    src = kps.astype(np.float32)
    if method == "least_squares":
        return similarity_lstsq(src.astype(np.float64), dst.astype(np.float64)), 5
    if method == "lmeds":
        m, inliers = cv2.estimateAffinePartial2D(src, dst, method=cv2.LMEDS)
    else:
        m, inliers = cv2.estimateAffinePartial2D(src, dst, method=cv2.RANSAC, ransacReprojThreshold=100.0)
    return np.asarray(m, np.float64), int(np.asarray(inliers).sum())


def corners(matrix: np.ndarray) -> np.ndarray:
    inv = cv2.invertAffineTransform(matrix)
    c = np.array([[0, 0], [SIZE, 0], [SIZE, SIZE], [0, SIZE]], np.float64)
    return np.asarray(c @ inv[:, :2].T + inv[:, 2])


def jitter(seq: list[np.ndarray], size: float) -> float:
    a = np.asarray(seq, np.float64)
    acc = a[2:] - 2 * a[1:-1] + a[:-2]
    return round(float(np.linalg.norm(acc, axis=2).mean()) / size * 1000, 2)


def measure(tracks: dict[str, list[np.ndarray]], size: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, kps_seq in tracks.items():
        cell: dict[str, Any] = {}
        for method in METHODS:
            fits = [fit(k, method) for k in kps_seq]
            cell[method] = {
                "corner_acceleration_permille": jitter([corners(m) for m, _ in fits], size),
                "frames_dropping_a_point": sum(n < 5 for _, n in fits),
            }
        out[label] = cell
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.crop_jitter", description=__doc__.split("\n\n")[0])
    p.add_argument("--output", type=Path, default=Path("reports/bench_crop_jitter.json"))
    args = p.parse_args(argv)
    frames = clip_frames(media_path(default_media_dir(os.environ), "carphone_pristine.mp4"), (352, 288))
    pipeline = Pipeline.from_config(PipelineConfig(), ModelStore(default_model_dir(os.environ)))
    raw: list[np.ndarray] = []
    tracked: list[np.ndarray] = []
    sizes: list[float] = []
    try:
        source = pipeline.prepare_source(frames[0], "clip")
        track = FaceTrack()
        for k, frame in enumerate(frames):
            faces = pipeline.detect([frame])[0]
            pipeline.process([FrameItem(frame, source, track=track, time_s=k * 1001 / 30000)])
            if not faces or not track.faces:
                continue
            face = max(faces, key=lambda f: f.area)
            raw.append(face.kps5)
            tracked.append(track.faces[0].shown.kps5)
            sizes.append(max(face.width, face.height))
    finally:
        pipeline.close()
    result = {
        "clip": "carphone_pristine.mp4 at 352x288",
        "frames": len(raw),
        "face_px": round(float(np.mean(sizes)), 1),
        "unit": "crop corners' mean acceleration, per mille of the face size per frame",
        **measure({"raw_detector_points": raw, "tracked_points": tracked}, float(np.mean(sizes))),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
