"""Micro-benchmark of the pipeline's per-face work outside inference (mesh_warp, colour, masks, paste,
landmarker pre-processing), on real faces at 320x240 (or `--size`).

Why: whole-pipeline timings hide which step moved; this times each step on its own, per face. Faces: the
carphone clip tracked through the real pipeline, plus the astronaut portrait, which is also the source. The
JSON holds per-call median, mean and p90 wall time and the median CPU time of the calling thread (the
landmarker's inference runs on ONNX Runtime's own threads, so its CPU figure leaves that out).

    flock /tmp/livefuse-bench.lock .venv/bin/python -m bench.stages --output reports/bench_stages.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from bench.quality.study import read_rgb
from engines.frames import FaceTrack, FrameItem, SourceFace
from engines.models.store import ModelStore, ModelUnavailable, default_model_dir
from engines.pipeline import Pipeline, PipelineConfig
from engines.processors.face_detector import Face
from engines.processors.face_landmarker import crop_batch, crop_matrix
from engines.processors.masks import region_mask, skin_weight
from engines.processors.mesh_warp import MARGIN, MeshWarpSwapper, warp_maps
from engines.processors.paste import paste_back
from engines.processors.shading import relight_lab
from engines.source.mesh import MeshSource
from engines.source.prepared import mesh_of
from loadgen.arguments import parse_resolution
from loadgen.media import MediaUnavailable, default_media_dir, media_path
from loadgen.percentiles import percentile, summary


def carphone(path: Path, count: int, size: tuple[int, int]) -> list[np.ndarray]:
    import av

    frames = []
    with av.open(str(path)) as c:
        for frame in c.decode(video=0):
            frames.append(cv2.resize(frame.to_ndarray(format="rgb24"), size, interpolation=cv2.INTER_CUBIC))
            if len(frames) == count:
                break
    return frames


def tracked_faces(
    pipeline: Pipeline, source: SourceFace, frames: list[np.ndarray]
) -> list[tuple[np.ndarray, Face, np.ndarray]]:
    """(frame, tracked face, its 468 points) for every frame where the tracker holds a face."""
    track = FaceTrack()
    out = []
    for k, frame in enumerate(frames):
        pipeline.process([FrameItem(frame, source, track=track, time_s=k / 15.0)])
        shown = track.faces[0].shown if track.faces else None
        if shown is not None and shown.landmarks is not None:
            out.append((frame, shown, shown.landmarks))
    return out


class Box:
    """One face's swap box and the intermediate images every stage needs as input (built once)."""

    def __init__(self, frame: np.ndarray, face: Face, source: MeshSource) -> None:
        assert face.landmarks is not None
        self.frame, self.face, self.target = frame, face, face.landmarks
        fh, fw = frame.shape[:2]
        lo = np.floor(self.target.min(0)).astype(int) - MARGIN
        hi = np.ceil(self.target.max(0)).astype(int) + MARGIN
        self.x0, self.y0 = max(int(lo[0]), 0), max(int(lo[1]), 0)
        x1, y1 = min(int(hi[0]), fw), min(int(hi[1]), fh)
        self.h, self.w = y1 - self.y0, x1 - self.x0
        self.local = self.target.astype(np.float64) - (self.x0, self.y0)
        self.size = float(max(self.h, self.w))
        maps = warp_maps(self.local, source, self.h, self.w)
        assert maps is not None
        self.map_x, self.map_y, covered = maps
        self.warped = cv2.remap(  # the source's L*a*b* and validity, as the swap warps them
            source.lab,
            self.map_x,
            self.map_y,
            interpolation=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_REPLICATE,
        )
        self.roi = frame[self.y0 : y1, self.x0 : x1]
        self.skin = covered & skin_weight((self.h, self.w), self.local, self.size)
        self.paste = covered.astype(np.float32)  # the paste's mask as relight reads it (its edge zone)


def timed(fn: Callable[[int], object], n: int, rounds: int) -> dict[str, float]:
    for k in range(n):  # warm caches once
        fn(k)
    ts, cpu = [], []
    for _ in range(rounds):
        for k in range(n):
            c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
            fn(k)
            ts.append((time.perf_counter_ns() - t0) / 1e6)
            cpu.append((time.thread_time_ns() - c0) / 1e6)
    return {
        **summary(ts, {"median_ms": 50, "mean_ms": "mean", "p90_ms": 90}, 4),
        "cpu_median_ms": round(percentile(cpu, 50), 4),
        "calls": len(ts),
    }


def run(
    store: ModelStore,
    media_root: Path,
    frames: int,
    rounds: int,
    size: tuple[int, int] = (320, 240),
    keep: tuple[str, ...] = ("mouth", "eyes"),
) -> dict[str, Any]:
    astronaut = read_rgb(media_path(media_root, "astronaut.png"))
    clip = carphone(media_path(media_root, "carphone_pristine.mp4"), frames, size)
    w, h = size
    side = min(w, h * 4 // 3)  # as at 320x240: the portrait 4/3 of the height square, its middle rows...
    cut = cv2.resize(astronaut, (side, side))[(side - h) // 2 : (side - h) // 2 + h]
    still = np.zeros((h, w, 3), np.uint8)  # ...in the middle of a wider frame
    still[:, (w - side) // 2 : (w - side) // 2 + side] = cut
    pipeline = Pipeline.from_config(PipelineConfig(), store)
    try:
        source = pipeline.prepare_source(astronaut, "astronaut")
        mesh: MeshSource = mesh_of(source)
        faces = tracked_faces(pipeline, source, clip)
        faces += tracked_faces(pipeline, source, [still] * 3)[-1:]
        boxes = [Box(f, face, mesh) for f, face, _ in faces]
        swapper = MeshWarpSwapper()
        patches = [p for p in (swapper.swap_one(f, lm, mesh, keep) for f, _, lm in faces) if p is not None]
        canvases = [f.copy() for f, _, _ in faces]
        n = len(boxes)
        matrices = [crop_matrix(face) for _, face, _ in faces]
        stages = {
            "swap_one": timed(lambda k: swapper.swap_one(faces[k][0], faces[k][2], mesh, keep), n, rounds),
            "warp_maps": timed(lambda k: warp_maps(boxes[k].local, mesh, boxes[k].h, boxes[k].w), n, rounds),
            "remap": timed(
                lambda k: cv2.remap(
                    mesh.lab,
                    boxes[k].map_x,
                    boxes[k].map_y,
                    cv2.INTER_LINEAR,
                    borderMode=cv2.BORDER_REPLICATE,
                ),
                n,
                rounds,
            ),
            "relight": timed(  # with the copy of the warped face's three channels the swap makes
                lambda k: relight_lab(
                    np.ascontiguousarray(boxes[k].warped[:, :, :3]),
                    boxes[k].roi,
                    boxes[k].skin,
                    boxes[k].size,
                    boxes[k].paste,
                ),
                n,
                rounds,
            ),
            "skin_weight": timed(
                lambda k: skin_weight((boxes[k].h, boxes[k].w), boxes[k].local, boxes[k].size), n, rounds
            ),
            "region_mask": timed(
                lambda k: region_mask((boxes[k].h, boxes[k].w), boxes[k].local, keep, boxes[k].size),
                n,
                rounds,
            ),
            "paste_back": timed(lambda k: paste_back(canvases[k], patches[k]), len(patches), rounds),
            "landmarker_crop_matrix": timed(lambda k: crop_matrix(faces[k][1]), n, rounds),
            "landmarker_crop_batch": timed(lambda k: crop_batch([faces[k][0]], [matrices[k]]), n, rounds),
            "landmarker_run_incl_inference": timed(
                lambda k: pipeline.landmarker.run([faces[k][:2]]), n, max(1, rounds // 4)
            ),
        }
        box_px = [b.h * b.w for b in boxes]
    finally:
        pipeline.close()
    return {
        "frame_size": f"{w}x{h}",
        "keep": list(keep),
        "faces": n,
        "rounds": rounds,
        "face_box_px_mean": round(float(np.mean(box_px)), 1),
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "stages_per_face": stages,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="bench/stages.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--frames", type=int, default=40, help="carphone frames (faces) to time over")
    p.add_argument("--rounds", type=int, default=10, help="passes over all faces per stage")
    p.add_argument("--size", default="320x240", help="frame size WxH")
    p.add_argument("--keep", default="mouth,eyes", help="target regions kept (comma-separated, or none)")
    p.add_argument("--output", type=Path, help="write the JSON report here (default: none, printed only)")
    p.add_argument("--media-dir", type=Path)
    p.add_argument("--model-dir", type=Path)
    args = p.parse_args(argv)
    if args.frames < 1 or args.rounds < 1:
        print("error: --frames and --rounds must be >= 1", file=sys.stderr)
        return 2
    try:
        w, h = parse_resolution(args.size)
        if w < 64 or h < 64:
            raise ValueError
    except ValueError:
        print(f"error: --size must be WxH, at least 64x64, got {args.size!r}", file=sys.stderr)
        return 2
    keep = tuple(r for r in args.keep.split(",") if r and r != "none")
    store = ModelStore(args.model_dir or default_model_dir(os.environ))
    try:
        result = run(
            store, args.media_dir or default_media_dir(os.environ), args.frames, args.rounds, (w, h), keep
        )
    except (ModelUnavailable, MediaUnavailable, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['faces']} faces at {result['frame_size']}, mean box {result['face_box_px_mean']:.0f} px")
    for name, s in result["stages_per_face"].items():
        print(
            f"  {name:32s} median {s['median_ms']:8.3f} ms   mean {s['mean_ms']:8.3f}   "
            f"p90 {s['p90_ms']:8.3f}   cpu median {s['cpu_median_ms']:8.3f}"
        )
    if args.output is not None:
        print(f"report: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
