"""Build an Engine from a model file and an `EngineConfig` (the one place that picks a backend)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engines.engine import Engine, EngineError
from engines.onnxruntime_engine import OrtConfig, OrtEngine


@dataclass(frozen=True)
class EngineConfig:
    backend: str = "onnxruntime"            # "onnxruntime" | "tensorrt" (native plans)
    providers: tuple[str, ...] = ("cpu",)   # ORT providers: cpu | cuda | tensorrt
    intra_op_threads: int = 0
    device_id: int = 0
    max_batch: int = 16
    fp16: bool = False
    trt_cache_dir: Path | None = None       # ORT-TRT engine/timing cache; native plan directory
    contexts: int = 2                       # native TensorRT: execution contexts (one CUDA stream each)
    extra: dict[str, str] = field(default_factory=dict)


def create_engine(model_path: Path, config: EngineConfig, name: str | None = None) -> Engine:
    if config.backend == "onnxruntime":
        ort_config = OrtConfig(
            providers=config.providers,
            intra_op_threads=config.intra_op_threads,
            max_batch=config.max_batch,
            device_id=config.device_id,
        )
        return OrtEngine(model_path, ort_config, name=name)
    if config.backend == "tensorrt":
        raise EngineError("native TensorRT backend not built yet")
    raise EngineError(f"unknown engine backend {config.backend!r} (onnxruntime | tensorrt)")
