"""Build an Engine from a model file and an `EngineConfig` (the one place that picks a backend)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from engines.backends.onnxruntime_engine import OrtConfig, OrtEngine, route_extra
from engines.backends.triton_engine import TritonConfig, TritonEngine
from engines.backends.trt_planning import parse_plan_filename, plan_model_name, select_plan
from engines.engine import Engine, EngineError

if TYPE_CHECKING:
    from engines.backends.torch_engine import TorchConfig


@dataclass(frozen=True)
class EngineConfig:
    # "onnxruntime" | "tensorrt" (native plans) | "triton" (remote) | "torch" (onnx2torch, CPU or CUDA)
    backend: str = "onnxruntime"
    providers: tuple[str, ...] = ("cpu",)  # ORT providers: cpu | cuda | tensorrt; torch: cpu | cuda
    intra_op_threads: int = 0
    ort_spinning: bool = False  # ORT intra-op threads spin-wait between jobs
    device_id: int = 0
    max_batch: int = 8  # the gateway's --max-batch default (its scheduler's largest batch)
    fp16: bool = False
    trt_cache_dir: Path | None = None  # ORT-TRT engine/timing cache; native plan directory
    contexts: int = 2  # TensorRT contexts / torch slots (one CUDA stream each)
    # raw ORT options: `provider:key`, or by name (trt_* to tensorrt, the rest to cuda): see route_extra
    extra: dict[str, str] = field(default_factory=dict)
    cuda_graphs: bool = False  # native TensorRT: one CUDA graph per bucket and input shape
    cudnn_conv_algo_search: str = "HEURISTIC"  # ORT CUDA provider
    opt_batch: int | None = None  # TensorRT profile opt batch (default max/2)
    # full shapes of inputs with dynamic non-batch dims (TensorRT profiles span them, torch captures each);
    # a name may appear several times: (("input", (1, 3, 320, 320)), ("input", (1, 3, 192, 320)))
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # backend "triton": server URL, model prefix, shm, timeouts
    triton: TritonConfig = field(default_factory=TritonConfig)


def ort_config_of(config: EngineConfig) -> OrtConfig:
    """EngineConfig -> OrtConfig; the ORT TensorRT provider keeps its engine and timing caches under
    trt_cache_dir (apart from native plans, which are tied to a different builder configuration)."""
    cache = config.trt_cache_dir
    gpu_extra = dict(config.extra)
    return OrtConfig(
        providers=config.providers,
        intra_op_threads=config.intra_op_threads,
        allow_spinning=config.ort_spinning,
        max_batch=config.max_batch,
        device_id=config.device_id,
        opt_batch=config.opt_batch,
        fp16=config.fp16,
        trt_engine_cache_dir=cache / "ort-engines" if cache else None,
        trt_timing_cache_dir=cache / "ort-timing" if cache else None,
        cudnn_conv_algo_search=config.cudnn_conv_algo_search,
        input_shapes=config.input_shapes,
        extra=route_extra(gpu_extra, config.providers),
    )


def torch_config_of(config: EngineConfig) -> TorchConfig:
    """EngineConfig -> TorchConfig: `providers` picks the device (cuda -> cuda:<device_id>, else cpu); CUDA
    graphs are on for CUDA unless a TensorRT-only setting turned them off (they are the point of the path)."""
    from engines.backends.torch_engine import TorchConfig

    unknown = [p for p in config.providers if p not in ("cpu", "cuda")]
    if unknown:
        raise EngineError(f"the torch backend runs on cpu or cuda, not {', '.join(unknown)}")
    device = f"cuda:{config.device_id}" if config.providers[:1] == ("cuda",) else "cpu"
    return TorchConfig(
        device=device,
        fp16=config.fp16,
        max_batch=config.max_batch,
        workers=config.contexts,
        input_shapes=config.input_shapes,
        threads=config.intra_op_threads,
    )


def build_command(model_path: Path, config: EngineConfig) -> str:
    """The exact command that builds the plan `create_engine` looks for."""
    parts = [
        "python scripts/build_engines.py",
        str(model_path),
        "--out-dir",
        str(config.trt_cache_dir),
        "--max-batch",
        str(config.max_batch),
        "--profiles",
        str(config.contexts),
    ]
    if config.fp16:
        parts += ["--precision", "fp16"]
    for name, shape in config.input_shapes:
        parts += ["--shape", f"{name}:{'x'.join(map(str, shape))}"]
    return " ".join(parts)


def plans_for(names: Iterable[str], model: str) -> list[str]:
    return sorted(n for n in names if (k := parse_plan_filename(n)) is not None and k.model == model)


def find_plan(model_path: Path, config: EngineConfig) -> Path:
    """The plan for this model on this machine; raises EngineError naming the build command when missing.

    A plan that exists but was built by another TensorRT minor version or GPU architecture is not used
    (deserializing it fails or runs wrong kernels); the error lists what was found.
    """
    if model_path.suffix == ".plan":
        if not model_path.is_file():
            raise EngineError(f"TensorRT plan not found: {model_path}")
        return model_path
    if config.trt_cache_dir is None:
        raise EngineError("native TensorRT backend needs trt_cache_dir (the directory of built plans)")
    model = plan_model_name(model_path)
    names = [p.name for p in config.trt_cache_dir.glob("*.plan")] if config.trt_cache_dir.is_dir() else []
    found = plans_for(names, model)
    if not found:
        raise EngineError(
            f"no TensorRT plan for {model} in {config.trt_cache_dir}: build it with "
            f"`{build_command(model_path, config)}`"
        )
    from engines.backends.tensorrt_engine import _import_gpu, device_compute_capability

    trt, _ = _import_gpu()
    cc = device_compute_capability(config.device_id)
    chosen = select_plan(found, model, trt.__version__, cc, "fp16" if config.fp16 else "fp32")
    if chosen is None:
        raise EngineError(
            f"no TensorRT plan for {model} matches TensorRT {trt.__version__} on "
            f"sm{cc[0]}{cc[1]} "
            f"(found {', '.join(found)}): rebuild with `{build_command(model_path, config)}`"
        )
    return config.trt_cache_dir / chosen


def create_engine(model_path: Path, config: EngineConfig, name: str | None = None) -> Engine:
    if config.backend == "onnxruntime":
        return OrtEngine(model_path, ort_config_of(config), name=name)
    if config.backend == "tensorrt":
        from engines.backends.tensorrt_engine import TrtConfig, TrtEngine

        plan = find_plan(model_path, config)
        return TrtEngine(
            plan,
            TrtConfig(
                device_id=config.device_id,
                contexts=config.contexts,
                cuda_graphs=config.cuda_graphs,
                input_shapes=config.input_shapes,
            ),
            name=name or plan_model_name(model_path),
        )
    if config.backend == "torch":
        from engines.backends.torch_engine import TorchEngine

        return TorchEngine(model_path, torch_config_of(config), name=name)
    if config.backend == "triton":
        # the model runs on the server, under the pipeline's engine name: the local file is not read
        return TritonEngine(name or plan_model_name(model_path), config.triton)
    raise EngineError(f"unknown engine backend {config.backend!r} (onnxruntime | tensorrt | triton | torch)")
