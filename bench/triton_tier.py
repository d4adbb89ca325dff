"""What Triton costs and what it holds, on this machine: prints a table and writes JSON.

`--part cost`: per-batch wall time of each pipeline model in-process (ONNX Runtime, 1 thread) vs through a
local Triton (the nvidia-pytriton wheel, python backend running the same ONNX) over gRPC and over gRPC +
system shared memory, for the detector's 320x320 and 640x640 letterboxes and FaceMesh's 192x192 crops at
batches 1, 4, 8: the difference is what the hop adds per batch. `--part capacity`: `loadgen --find-capacity`
against a gateway with `--engine triton`, to compare with the in-process capacity.

    flock /tmp/livefuse-bench.lock python -m bench.triton_tier --part cost \
        --output reports/bench_triton.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from engines.backends.onnxruntime_engine import OrtConfig, OrtEngine
from engines.backends.triton_engine import TritonConfig, TritonEngine
from engines.triton.repository import RepositoryConfig, build_pipeline_repository
from engines.triton.server import TritonProcess, TritonServerConfig
from loadgen.percentiles import percentile

ROOT = Path(__file__).resolve().parents[1]

CELLS = (
    ("face_detector", "320x240", (3, 320, 320)),
    ("face_detector", "640x360", (3, 640, 640)),
    ("face_landmarker", "any", (3, 192, 192)),
)


def _time(fn: Any, feeds: dict[str, np.ndarray], iterations: int, warmup: int) -> float:
    for _ in range(warmup):
        fn(feeds)
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        fn(feeds)
        times.append((time.perf_counter() - t0) * 1000.0)
    return percentile(times, 50)


def bench_cost(
    repo: Path, url: str, batches: list[int], iterations: int, warmup: int
) -> list[dict[str, Any]]:
    rows = []
    rng = np.random.default_rng(0)
    for model, resolution, shape in CELLS:
        local = OrtEngine(repo / model / "1" / "model.onnx", OrtConfig(intra_op_threads=1, max_batch=16))
        grpc = TritonEngine(model, TritonConfig(url=url))
        shm = TritonEngine(model, TritonConfig(url=url, shm=True))
        name = local.inputs[0].name
        try:
            for b in batches:
                feeds = {name: rng.random((b, *shape), dtype=np.float32)}
                inprocess_ms = _time(local.infer, feeds, iterations, warmup)
                grpc_ms = _time(grpc.infer, feeds, iterations, warmup)
                shm_ms = _time(shm.infer, feeds, iterations, warmup)
                row = {
                    "model": model,
                    "frames": resolution,
                    "input": "x".join(map(str, shape)),
                    "batch": b,
                    "input_mb": round(feeds[name].nbytes / 1e6, 2),
                    "inprocess_ms": inprocess_ms,
                    "triton_grpc_ms": grpc_ms,
                    "triton_shm_ms": shm_ms,
                    "added_grpc_ms": grpc_ms - inprocess_ms,
                    "added_shm_ms": shm_ms - inprocess_ms,
                }
                rows.append({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()})
                print(
                    f"{model:16s} {resolution:8s} b{b:<2d} in-process {row['inprocess_ms']:7.2f} ms  "
                    f"triton grpc {row['triton_grpc_ms']:7.2f} (+{row['added_grpc_ms']:.2f})  "
                    f"shm {row['triton_shm_ms']:7.2f} (+{row['added_shm_ms']:.2f})",
                    flush=True,
                )
        finally:
            for e in (local, grpc, shm):
                e.close()
    return rows


def bench_capacity(repo: Path, url: str, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    from loadgen.embedded import EmbeddedGateway, EmbeddedGatewayConfig

    config = EmbeddedGatewayConfig(
        engine="triton",
        max_sessions=64,
        degradation=False,
        ready_timeout_s=120.0,
        stop_timeout_s=30.0,
        extra_args=("--triton-url", url, "--event-log", "none") + (("--triton-shm",) if args.shm else ()),
    )
    report = work / "capacity.json"

    async def run_loadgen() -> None:
        async with EmbeddedGateway(config, cwd=ROOT) as gateway:
            cmd = [
                sys.executable,
                "-m",
                "loadgen.cli",
                "capacity",
                "--url",
                gateway.url,
                "--resolution",
                args.resolution,
                "--fps",
                "15",
                "--test-cases",
                "single_face",
                "--capacity-start",
                "2",
                "--capacity-step",
                "2",
                "--capacity-max-jobs",
                "12",
                "--window",
                "5",
                "--max-windows",
                "3",
                "--capacity-max-time",
                str(args.capacity_max_time),
                "--no-live",
                "--output",
                str(report),
            ]
            await asyncio.to_thread(subprocess.run, cmd, cwd=ROOT, check=False)

    asyncio.run(run_loadgen())
    data = json.loads(report.read_text())
    return {
        "capacity": data.get("capacity"),
        "runs": [
            {
                "jobs": r["concurrent_jobs"],
                "p95_ms": r["latency_ms"]["p95"],
                "received_ratio": r["received_ratio"],
                "slo_met": r["slo_met"],
                "gateway_capacity_estimate": r["gateway"].get("capacity_sessions"),
                "gateway_utilisation": r["gateway"].get("utilisation"),
                "binding": r["gateway"].get("capacity_binding"),
            }
            for r in data["runs"]
        ],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=("cost", "capacity", "all"), default="cost")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--resolution", default="320x240", help="capacity: frame size")
    p.add_argument("--shm", action="store_true", help="capacity: gateway uses --triton-shm")
    p.add_argument("--capacity-max-time", type=float, default=420.0)
    p.add_argument("--output", type=Path, help="write the JSON report here (default: none, printed only)")
    args = p.parse_args(argv)
    from engines.models.store import ModelStore, default_model_dir

    store = ModelStore(default_model_dir(os.environ))
    result: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "note": "shared machine; see docs"}}
    with tempfile.TemporaryDirectory(prefix="bench-triton-") as tmp:
        work = Path(tmp)
        repo = work / "repo"
        build_pipeline_repository(
            repo,
            store.root,
            RepositoryConfig("python", 16, (4, 8), 1000),
            ["face_detector", "face_landmarker"],
        )
        from loadgen.embedded import free_port

        server = TritonProcess(
            TritonServerConfig(repo, free_port(), free_port(), free_port(), work_dir=work),
            log_path=work / "triton.log",
        )
        server.start()
        try:
            server.wait_ready(120)
            url = f"127.0.0.1:{server.config.grpc_port}"
            if args.part in ("cost", "all"):
                result["cost"] = bench_cost(repo, url, args.batches, args.iterations, args.warmup)
            if args.part in ("capacity", "all"):
                result["capacity_triton"] = bench_capacity(repo, url, work, args)
                print(json.dumps(result["capacity_triton"], indent=1))
        finally:
            server.stop()
    print(json.dumps(result, indent=2))
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2))
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
