"""Offline pipeline benchmark: per-stage batch time at several batch sizes and resolutions, on this machine.

Frames are real faces: carphone (a talking head) scaled to each resolution, alternating with the astronaut
portrait placed on a grey canvas of that size; the source face is the astronaut. Each (resolution, batch)
cell runs `--iterations` calls of `Pipeline.process` after `--warmup` calls and reports medians.

    .venv/bin/python -m bench.pipeline --output reports/bench_pipeline.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from bench.quality.study import read_rgb
from engines.factory import EngineConfig
from engines.frames import PIPELINE_STAGES, PROCESSORS, FrameItem, FrameOptions
from engines.models.store import ModelStore, ModelUnavailable, default_model_dir
from engines.pipeline import Pipeline, PipelineConfig
from loadgen.arguments import parse_resolution
from loadgen.media import MediaUnavailable, default_media_dir, media_path
from loadgen.percentiles import percentile


def carphone_frames(path: Path, count: int) -> list[np.ndarray]:
    import av

    frames = []
    with av.open(str(path)) as c:
        for i, frame in enumerate(c.decode(video=0)):
            if i % 4 == 0:
                frames.append(np.asarray(frame.to_ndarray(format="rgb24")))
            if len(frames) == count:
                break
    return frames


def build_frames(
    resolution: tuple[int, int], count: int, astronaut: np.ndarray, carphone: list[np.ndarray]
) -> list[np.ndarray]:
    """`count` frames at `resolution`: carphone scaled, alternating with the astronaut on a grey canvas."""
    w, h = resolution
    out = []
    for i in range(count):
        if i % 2 == 0:
            out.append(cv2.resize(carphone[(i // 2) % len(carphone)], (w, h), interpolation=cv2.INTER_LINEAR))
        else:
            canvas = np.full((h, w, 3), 110, np.uint8)
            side = min(h, w)
            face = cv2.resize(astronaut, (side, side), interpolation=cv2.INTER_AREA)
            x0 = (w - side) // 2 + (i * 7) % max(1, (w - side) // 2 + 1)
            canvas[:side, x0 : x0 + side] = face  # x0 + side <= w by construction
            out.append(canvas)
    return out


def run_cell(
    pipeline: Pipeline,
    frames: list[np.ndarray],
    items_opts: FrameOptions,
    source: Any,
    warmup: int,
    iterations: int,
) -> dict[str, Any]:
    items = [FrameItem(image=f, source=source, options=items_opts) for f in frames]
    for _ in range(warmup):
        pipeline.process(items)
    stage_ms: dict[str, list[float]] = {s: [] for s in PIPELINE_STAGES}
    sizes: dict[str, int] = {}
    totals, faces = [], 0
    for _ in range(iterations):
        t0 = time.perf_counter()
        outs = pipeline.process(items)
        totals.append((time.perf_counter() - t0) * 1000.0)
        merged: dict[str, float] = {}
        for o in outs:
            merged.update(o.timings_ms)
            sizes.update(o.batch_sizes)
        for s in PIPELINE_STAGES:
            stage_ms[s].append(merged.get(s, 0.0))
        faces = sum(o.faces for o in outs)
    total = percentile(totals, 50)
    return {
        "batch": len(frames),
        "faces": faces,
        "stage_ms": {s: round(percentile(v, 50), 2) for s, v in stage_ms.items()},
        "batch_sizes": sizes,
        "total_ms": round(total, 2),
        "per_frame_ms": round(total / len(frames), 2),
        "frames_per_s": round(1000.0 * len(frames) / total, 1),
    }


def format_table(results: list[dict[str, Any]]) -> str:
    head = (
        ["resolution", "batch", "faces"]
        + [s.replace("face_", "") for s in PIPELINE_STAGES]
        + ["total", "per frame", "fps"]
    )
    rows = [head]
    for r in results:
        rows.append(
            [r["resolution"], str(r["batch"]), str(r["faces"])]
            + [f"{r['stage_ms'][s]:.1f}" for s in PIPELINE_STAGES]
            + [f"{r['total_ms']:.1f}", f"{r['per_frame_ms']:.1f}", f"{r['frames_per_s']:.1f}"]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n(stage columns: ms per batch call, median; total: wall ms of process())\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--resolutions", nargs="+", default=["320x240", "640x360", "1280x720"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 4, 8])
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--processors", nargs="+", default=list(PROCESSORS), choices=list(PROCESSORS))
    parser.add_argument("--swapper", default="mesh_warp")
    parser.add_argument("--enhancer", default="detail")
    parser.add_argument("--detector-size", type=int, default=320)
    parser.add_argument("--providers", nargs="+", default=["cpu"])
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--media-dir", type=Path, default=None)
    parser.add_argument("--output", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)

    store = ModelStore(args.model_dir or default_model_dir(os.environ))
    media_root = args.media_dir or default_media_dir(os.environ)
    config = PipelineConfig(
        processors=tuple(args.processors),
        swapper=args.swapper,
        enhancer=args.enhancer,
        detector_size=args.detector_size,
        engine=EngineConfig(providers=tuple(args.providers)),
    )
    try:
        astronaut = read_rgb(media_path(media_root, "astronaut.png"))
        carphone = carphone_frames(media_path(media_root, "carphone_pristine.mp4"), 8)
        pipeline = Pipeline.from_config(config, store)
    except (ModelUnavailable, MediaUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    results: list[dict[str, Any]] = []
    try:
        pipeline.warmup()
        source = pipeline.prepare_source(astronaut, "astronaut")
        options = FrameOptions(processors=tuple(args.processors))
        for res in args.resolutions:
            wh = parse_resolution(res)
            for batch in args.batch_sizes:
                frames = build_frames(wh, batch, astronaut, carphone)
                cell = run_cell(pipeline, frames, options, source, args.warmup, args.iterations)
                cell["resolution"] = res
                results.append(cell)
                print(f"{res} batch {batch}: {cell['total_ms']:.1f} ms", file=sys.stderr, flush=True)
    finally:
        pipeline.close()
    print(format_table(results))
    if args.output:
        report = {
            "config": {**asdict(config), "engine": asdict(config.engine)},
            "machine": {
                "platform": platform.platform(),
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
            },
            "iterations": args.iterations,
            "results": results,
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2, default=str))
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
