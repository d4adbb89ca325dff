"""The swap's cost per face in two or more checkouts of this repository, interleaved, read through a busy
machine's noise.

Why: on a shared box one run's median moves by a millisecond or two with the load (`bench.stages`), more
than the changes it should tell apart. Each tree runs `MeshWarpSwapper.swap_one` in a worker of its own
(`PYTHONPATH` is the tree) on the same faces (the carphone clip at `--size`, tracked by that tree's
pipeline, the astronaut as the source), in blocks alternating between the trees. Each face keeps its
fastest call; a tree's cost is the mean of those minima over the faces: the work's time when nothing else
held the core. The same tree twice reads within 0.15 ms per face on this box.

    python -m bench.swap_cost --trees /tmp/before . --blocks 60 --output reports/swap_cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from loadgen.arguments import parse_resolution

# What each worker runs, inside its tree: only APIs every tree since the mesh swap has.
WORKER = r"""
import json, os, sys, time
import cv2
import bench.stages as S
from engines.models.store import ModelStore, default_model_dir
from engines.pipeline import Pipeline, PipelineConfig
from loadgen.media import default_media_dir, media_path

cv2.setNumThreads(1)
w, h, frames = (int(v) for v in sys.argv[1:4])
store = ModelStore(default_model_dir(os.environ))
root = default_media_dir(os.environ)
pipeline = Pipeline.from_config(PipelineConfig(), store)
source = pipeline.prepare_source(S.read_rgb(media_path(root, "astronaut.png")), "astronaut")
try:
    from engines.source.prepared import mesh_of
    mesh = mesh_of(source)
except ImportError:
    mesh = source.data["mesh_warp"]
clip = S.carphone(media_path(root, "carphone_pristine.mp4"), frames, (w, h))
faces = S.tracked_faces(pipeline, source, clip)
swapper = S.MeshWarpSwapper()
best = [float("inf")] * len(faces)
print("ready", flush=True)
for line in sys.stdin:
    for _ in range(int(line)):
        for i, (frame, _, points) in enumerate(faces):
            t = time.perf_counter()
            swapper.swap_one(frame, points, mesh, ("mouth", "eyes"))
            best[i] = min(best[i], time.perf_counter() - t)
    print(json.dumps(best), flush=True)
"""


def start(tree: Path, size: tuple[int, int], frames: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(size[0]), str(size[1]), str(frames)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError(f"{tree}: the worker did not start (run it there by hand to see why)")
    return proc


def commit_of(tree: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or "unknown"


def run(trees: list[Path], size: tuple[int, int], frames: int, blocks: int, passes: int) -> dict[str, Any]:
    procs = [start(t, size, frames) for t in trees]
    minima: list[list[float]] = [[] for _ in trees]
    progress = []
    began = time.monotonic()
    try:
        for b in range(blocks):
            order = range(len(trees)) if b % 2 == 0 else reversed(range(len(trees)))
            for j in order:
                proc = procs[j]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(f"{passes}\n")
                proc.stdin.flush()
                minima[j] = json.loads(proc.stdout.readline())
            means = [sum(m) / len(m) * 1000.0 for m in minima]
            progress.append([round(v, 4) for v in means])
            if (b + 1) % 10 == 0 or b + 1 == blocks:
                line = "  ".join(f"{t}: {v:.3f}" for t, v in zip(trees, means, strict=True))
                print(f"after {b + 1} blocks, ms per face: {line}", flush=True)
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=60)
    means = progress[-1]
    return {
        "frame_size": f"{size[0]}x{size[1]}",
        "faces": len(minima[0]),
        "blocks": blocks,
        "passes_per_block": passes,
        "seconds": round(time.monotonic() - began, 1),
        "trees": [
            {
                "path": str(t),
                "commit": commit_of(t),
                "ms_per_face": v,
                "over_first_ms": round(v - means[0], 4),
            }
            for t, v in zip(trees, means, strict=True)
        ],
        "progress_ms_per_face": progress,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="bench/swap_cost.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--trees", nargs="+", type=Path, required=True, help="checkouts to compare (two or more)")
    p.add_argument("--blocks", type=int, default=60, help="alternating blocks (each tree once per block)")
    p.add_argument("--passes", type=int, default=2, help="passes over all faces per block")
    p.add_argument("--frames", type=int, default=20, help="carphone frames (faces)")
    p.add_argument("--size", default="640x360", help="frame size WxH")
    p.add_argument("--output", type=Path, help="write the JSON report here")
    args = p.parse_args(argv)
    missing = [str(t) for t in args.trees if not (t / "engines").is_dir()]
    if len(args.trees) < 2 or missing:
        print(
            f"error: --trees takes two or more checkouts of this repository (not: {missing})", file=sys.stderr
        )
        return 2
    if args.blocks < 1 or args.passes < 1 or args.frames < 1:
        print("error: --blocks, --passes and --frames must be >= 1", file=sys.stderr)
        return 2
    try:
        size = parse_resolution(args.size)
    except ValueError:
        print(f"error: --size must be WxH, got {args.size!r}", file=sys.stderr)
        return 2
    try:
        result = run([t.resolve() for t in args.trees], size, args.frames, args.blocks, args.passes)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2) + "\n")
        print(f"report: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
