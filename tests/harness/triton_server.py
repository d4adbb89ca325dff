"""A real Triton (the nvidia-pytriton wheel's tritonserver) on free 127.0.0.1 ports, for tests and benchmarks.

The repository is written by the function scripts/build_engines.py --triton-repository calls (python backend:
ONNX Runtime inside Triton), from the provisioned models, so tests exercise exactly what a developer deploys.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

from engines.triton.repository import RepositoryConfig, build_pipeline_repository
from engines.triton.server import TritonProcess, TritonServerConfig
from loadgen.embedded import free_ports


def build_repository(
    repo: Path,
    model_dir: Path,
    max_batch: int = 8,
    preferred: tuple[int, ...] = (2, 4),
    delay_us: int = 2000,
    models: tuple[str, ...] = ("face_detector", "face_landmarker"),
) -> Path:
    """The python-backend repository `build_engines.py --triton-repository` writes, for these models."""
    config = RepositoryConfig("python", max_batch, preferred, delay_us, 1, "KIND_CPU", 1)
    build_pipeline_repository(repo, model_dir, config, list(models))
    return repo


def start_triton(repo: Path, log: Path, work_dir: Path) -> TritonProcess:
    grpc, http, metrics = free_ports(3)
    config = TritonServerConfig(repo, grpc_port=grpc, http_port=http, metrics_port=metrics, work_dir=work_dir)
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
