"""A real Triton (the nvidia-pytriton wheel's tritonserver) on free 127.0.0.1 ports, for tests and benchmarks.

The repository is written by scripts/build_engines.py's own function (python backend: ONNX Runtime inside
Triton), from the provisioned models, so tests exercise exactly what a developer deploys.
"""

from __future__ import annotations

import argparse
import socket
import urllib.request
from pathlib import Path

from engines.triton.server import TritonProcess, TritonServerConfig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_repository(repo: Path, model_dir: Path, max_batch: int = 8, preferred: tuple[int, ...] = (2, 4),
                     delay_us: int = 2000, models: str = "face_detector,face_landmarker") -> Path:
    from scripts.build_engines import build_triton_repository

    args = argparse.Namespace(
        triton_repository=repo, backend="python", models=models, model_dir=model_dir, instances=1,
        kind=None, preferred_batch=list(preferred), max_queue_delay_us=delay_us, intra_op_threads=1,
        max_batch=max_batch, min_batch=1, opt_batch=None, shape=[], precision="fp32", workspace_gb=1.0,
        timing_cache=None, device=0)
    build_triton_repository(args)
    return repo


def start_triton(repo: Path, log: Path, work_dir: Path) -> TritonProcess:
    config = TritonServerConfig(repo, grpc_port=free_port(), http_port=free_port(), metrics_port=free_port(),
                                work_dir=work_dir)
    server = TritonProcess(config, log_path=log)
    server.start()
    try:
        server.wait_ready(120)
    except BaseException:
        server.stop()
        raise
    return server


def grpc_url(server: TritonProcess) -> str:
    return f"127.0.0.1:{server.config.grpc_port}"


def metrics(server: TritonProcess) -> dict[tuple[str, str], float]:
    """(metric name, model) -> value for Triton's nv_inference_* counters."""
    url = f"http://127.0.0.1:{server.config.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if line.startswith("nv_inference_") and 'model="' in line:
            name = line.split("{", 1)[0]
            model = line.split('model="', 1)[1].split('"', 1)[0]
            out[(name, model)] = out.get((name, model), 0.0) + float(line.rsplit(" ", 1)[-1])
    return out
