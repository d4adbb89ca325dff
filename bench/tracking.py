#!/usr/bin/env python3
"""Tracking when frames are dropped: detector runs, lost faces and pipeline ms per processed frame.

Under load the gateway processes only some of a session's frames, so the face moves further between two
processed frames; a crop that does not follow loses the mesh and the detector runs again, so dropping frames
would make the remaining ones dearer. This runs the real pipeline (one session, one frame at a time) over
loadgen's synthetic clips, processing every k-th frame with its capture time, in each tracking mode (`MODES`),
and measures where the swap lands (distance from a fresh detection's face centre, % of the face's size). The
contact sheet: 8 consecutive processed frames of the 640x360 glide, one row per mode, the face enlarged.

    python -m bench.tracking --output reports/bench_tracking.json \
        --contact-sheet reports/bench_tracking.png
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.quality.study import read_rgb
from engines.frames import STAGE_DETECT, FaceTrack, FrameItem
from engines.models.store import ModelStore, ModelUnavailable, default_model_dir
from engines.pipeline import Pipeline, PipelineConfig
from engines.processors.tracking import TrackingConfig, face_size, measured, mesh_center
from loadgen.media import MediaUnavailable, default_media_dir, media_path
from loadgen.percentiles import percentile
from loadgen.synth import SynthConfig, build_loop

# "default" = the crop led by the face's velocity, an off-centre mesh run again from its own crop, a lost face
# relinked to the nearest detection and looked for again on the same frame; "no 2nd look" = all but the
# same-frame look; "before" = none of them (the tracking before 2026-12-01's sixth session: the crop at the
# last mesh, a lost face held where it was and relinked by box overlap only).
MODES: dict[str, TrackingConfig] = {
    "default": TrackingConfig(),
    "no 2nd look": TrackingConfig(redetect_lost=False),
    "before": TrackingConfig(predict=False, redetect_lost=False, relink_radius=0.0, refine_offset=0.0),
}


def reference_faces(pipeline: Pipeline, frames: list[np.ndarray]) -> list[list[tuple[np.ndarray, float]]]:
    """Per frame, (centre, size) of every face a fresh detection + FaceMesh finds (no tracking)."""
    out: list[list[tuple[np.ndarray, float]]] = []
    for frame in frames:
        faces = pipeline.detect([frame])[0]
        found = []
        for f, m in zip(faces, pipeline.landmarker.run([(frame, f) for f in faces]), strict=True):
            if pipeline.landmarker.is_face(m):
                face = measured(f, m.landmarks, m.presence)
                found.append((mesh_center(face), face_size(face)))
        out.append(found)
    return out


def run_clip(
    pipeline: Pipeline,
    frames: list[np.ndarray],
    source: Any,
    stride: int,
    count: int,
    fps: float,
    reference: list[list[tuple[np.ndarray, float]]],
    keep: list[tuple[np.ndarray, np.ndarray | None]] | None = None,
) -> dict[str, float | None]:
    """Process frames 0, stride, 2*stride, ... (< count) of the looping clip as one session (the output
    images are appended to `keep` when given, with the centre of the face a fresh detection finds)."""
    track = FaceTrack()
    detected = lost = without_face = processed = 0
    total_ms = 0.0
    errors: list[float] = []
    for i in range(0, count, stride):
        item = FrameItem(image=frames[i % len(frames)], source=source, track=track, time_s=i / fps)
        t0 = time.perf_counter()
        out = pipeline.process([item])[0]
        total_ms += (time.perf_counter() - t0) * 1000.0
        processed += 1
        truth = reference[i % len(frames)]
        if keep is not None:
            keep.append((out.image, truth[0][0] if truth else None))
        detected += STAGE_DETECT in out.timings_ms
        lost += track.lost
        without_face += out.faces == 0
        for face in track.last_faces or []:
            if truth:
                c = mesh_center(face)
                centre, size = min(truth, key=lambda r: float(np.linalg.norm(r[0] - c)))
                errors.append(100.0 * float(np.linalg.norm(centre - c)) / max(size, face_size(face), 1.0))
    return {
        "processed": processed,
        "detector_share": round(detected / processed, 3),
        "lost_share": round(lost / processed, 3),
        "no_face_share": round(without_face / processed, 3),
        "ms_per_frame": round(total_ms / processed, 2),
        "paste_error_pct_mean": round(float(np.mean(errors)), 1) if errors else None,
        "paste_error_pct_p95": round(percentile(errors, 95), 1) if errors else None,
    }


SHEET_CASE = ("glide 640x360", 2)


def write_contact_sheet(
    path: Path,
    rows: dict[str, list[tuple[np.ndarray, np.ndarray | None]]],
    start: int = 20,
    count: int = 8,
    half: int = 60,
    scale: int = 3,
) -> None:
    """One row per mode: `count` consecutive processed frames from `start`, each a window of 2*`half` px
    around where a fresh detection finds the face (so the face should sit in the middle), enlarged `scale`x
    and labelled with the mode."""
    import cv2

    tiles = []
    for mode, images in rows.items():
        row = []
        for img, centre in images[start : start + count]:
            h, w = img.shape[:2]
            cx, cy = (w // 2, h // 2) if centre is None else (int(centre[0]), int(centre[1]))
            padded = cv2.copyMakeBorder(img, half, half, half, half, cv2.BORDER_CONSTANT, value=(0, 0, 0))
            window = padded[cy : cy + 2 * half, cx : cx + 2 * half]
            tile = cv2.resize(window, (2 * half * scale, 2 * half * scale), interpolation=cv2.INTER_NEAREST)
            row.append(cv2.copyMakeBorder(tile, 2, 2, 2, 2, cv2.BORDER_CONSTANT, value=(255, 255, 255)))
        strip = np.concatenate(row, axis=1)
        label = np.full((26, strip.shape[1], 3), 255, np.uint8)
        cv2.putText(label, mode, (6, 19), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (0, 0, 0), 1, cv2.LINE_AA)
        tiles.append(np.concatenate([label, strip], axis=0))
    sheet = np.concatenate(tiles, axis=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--strides",
        type=int,
        nargs="+",
        default=[1, 2, 3, 4],
        help="process every k-th frame (1 = all; 2 = half dropped, ...)",
    )
    p.add_argument("--frames", type=int, default=300, help="clip frames per run (at 15 fps)")
    p.add_argument("--fps", type=float, default=15.0)
    p.add_argument("--clips", nargs="+", default=None, help="only these clips (e.g. 'glide 640x360')")
    p.add_argument("--model-dir", type=Path, default=None)
    p.add_argument("--media-dir", type=Path, default=None)
    p.add_argument("--output", type=Path, default=None, help="write the results as JSON here")
    p.add_argument(
        "--contact-sheet",
        type=Path,
        default=None,
        help="write a PNG of processed frames per tracking mode (640x360 glide, every 2nd frame)",
    )
    args = p.parse_args(argv)
    store = ModelStore(args.model_dir or default_model_dir(os.environ))
    media = args.media_dir or default_media_dir(os.environ)
    try:
        astronaut = read_rgb(media_path(media, "astronaut.png"))
        carphone = media_path(media, "carphone_pristine.mp4")
        clips = {
            "glide 640x360": build_loop(SynthConfig(640, 360, args.fps), media),
            "glide 320x240": build_loop(SynthConfig(320, 240, args.fps), media),
            "carphone 640x360": build_loop(
                SynthConfig(640, 360, args.fps, source_video=carphone, loop_frames=60), media
            ),
        }
        pipelines = {}
        for mode, tracking in MODES.items():
            pipelines[mode] = Pipeline.from_config(PipelineConfig(tracking=tracking), store)
    except (ModelUnavailable, MediaUnavailable, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    results: list[dict[str, Any]] = []
    sheet_rows: dict[str, list[tuple[np.ndarray, np.ndarray | None]]] = {}
    try:
        for pipe in pipelines.values():
            pipe.warmup()
        source = pipelines["default"].prepare_source(astronaut, "astronaut")
        print(
            f"{'clip':18} {'k':>2} {'tracking':11} {'detector':>9} {'lost':>6} {'ms/frame':>9} "
            f"{'paste error % mean / p95':>25}"
        )
        for name, loop in clips.items():
            if args.clips and name not in args.clips:
                continue
            frames = [loop.rgb(i) for i in range(len(loop))]
            reference = reference_faces(pipelines["default"], frames)
            for stride in args.strides:
                for mode, pipe in pipelines.items():
                    keep = sheet_rows.setdefault(mode, []) if (name, stride) == SHEET_CASE else None
                    row = {
                        "clip": name,
                        "stride": stride,
                        "tracking": mode,
                        **run_clip(pipe, frames, source, stride, args.frames, args.fps, reference, keep),
                    }
                    results.append(row)
                    print(
                        f"{name:18} {stride:>2} {mode:11} {row['detector_share']:>8.0%} "
                        f"{row['lost_share']:>6.0%} {row['ms_per_frame']:>9.2f} "
                        f"{row['paste_error_pct_mean']!s:>15} / {row['paste_error_pct_p95']!s}",
                        flush=True,
                    )
    finally:
        for pipe in pipelines.values():
            pipe.close()
    if args.contact_sheet is not None and sheet_rows:
        write_contact_sheet(args.contact_sheet, sheet_rows)
        print(f"wrote {args.contact_sheet}")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(
            json.dumps(
                {"kind": "bench_tracking", "frames": args.frames, "fps": args.fps, "results": results},
                indent=2,
            )
            + "\n"
        )
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
