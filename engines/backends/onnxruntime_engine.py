"""ONNX Runtime backend (the embedded default): CPU, CUDA or ORT's TensorRT provider, chosen by config.

One `InferenceSession` is shared by all worker threads (ORT's `Run()` is thread-safe): one copy of the
weights, one TensorRT engine build. Provider options come from pure functions (`provider_options`,
`trt_profile_options`) so deployment settings are tested without a GPU. Defaults that avoid stalls on a live
stream: the TensorRT provider gets the whole dynamic batch range up front (else a new batch size rebuilds the
engine mid-stream) and engine and timing caches; the CUDA provider uses HEURISTIC cuDNN search, since the
default EXHAUSTIVE one benchmarks every new input shape, and browsers change resolution.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engines.backends.graph_keys import shapes_by_input
from engines.engine import BatchRange, DescribedEngine, EngineError, TensorSpec

PROVIDER_NAMES: Mapping[str, str] = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}
CUDNN_SEARCH = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")
GPU_HINT = "GPU providers need an NVIDIA GPU and `pip install 'livefuse[gpu]'`"


@dataclass(frozen=True)
class OrtConfig:
    providers: tuple[str, ...] = ("cpu",)
    intra_op_threads: int = 0  # 0 = ORT default
    inter_op_threads: int = 1
    # Idle intra-op threads spin-wait for the next job by default; in the gateway they share the cores with
    # the VP8 codecs and aiortc, so spinning burns what the codecs need. Off by default.
    allow_spinning: bool = False
    max_batch: int = 32
    device_id: int = 0
    min_batch: int = 1
    opt_batch: int | None = None  # TensorRT profile opt (default: max/2)
    fp16: bool = False  # TensorRT: allow FP16 kernels; CUDA alone: an fp16 graph
    trt_engine_cache_dir: Path | None = None  # TensorRT provider: serialized engines
    trt_timing_cache_dir: Path | None = None  # TensorRT provider: layer timing cache
    trt_workspace_gb: float = 4.0
    cudnn_conv_algo_search: str = "HEURISTIC"  # CUDA provider
    # full shapes (batch ignored) of inputs whose non-batch dims are dynamic, e.g. RetinaFace at 640x640; an
    # input named several times gets a TensorRT profile spanning all its shapes
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    extra: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # provider -> raw ORT options


def _dims(shape: Sequence[int | str | None]) -> tuple[int | str | None, ...]:
    return tuple(shape)


def resolve_providers(names: Sequence[str]) -> list[str]:
    """Config names (cpu/cuda/tensorrt) -> ORT provider names; an unknown name is one clear error line."""
    out: list[str] = []
    for p in names:
        if p not in PROVIDER_NAMES:
            raise EngineError(
                f"unknown ONNX Runtime provider {p!r} (choose from {', '.join(PROVIDER_NAMES)})"
            )
        out.append(PROVIDER_NAMES[p])
    if not out:
        raise EngineError("no ONNX Runtime provider configured")
    return out


def check_available(providers: Sequence[str], available: Sequence[str]) -> None:
    missing = [p for p in providers if p not in available]
    if missing:
        raise EngineError(
            f"ONNX Runtime providers not available here: {', '.join(missing)} "
            f"(have {', '.join(sorted(available))}; {GPU_HINT})"
        )


def check_loaded(name: str, requested: Sequence[str], loaded: Sequence[str]) -> None:
    """ONNX Runtime drops a provider it cannot load (missing CUDA libraries, an unsupported GPU) with a
    warning and runs on the CPU: for a GPU deployment that is a silently slow gateway, so it is an error
    at start."""
    missing = [p for p in requested if p not in loaded and p != "CPUExecutionProvider"]
    if missing:
        raise EngineError(
            f"{name}: ONNX Runtime did not load {', '.join(missing)} (running on "
            f"{', '.join(loaded) or 'nothing'}); {GPU_HINT}"
        )


def route_extra(extra: Mapping[str, str], providers: Sequence[str]) -> dict[str, dict[str, str]]:
    """Raw provider options -> per provider. Each GPU provider gets only its own options: CUDA's and
    TensorRT's option names differ, and either rejects the other's. `provider:key` names one explicitly;
    otherwise `trt_*` keys go to tensorrt and the rest to cuda (to the only GPU provider when there is
    one)."""
    gpu = [p for p in providers if p != "cpu"]
    out: dict[str, dict[str, str]] = {p: {} for p in gpu}
    for key, value in extra.items():
        provider, sep, name = key.partition(":")
        if sep:
            if provider not in out:
                raise EngineError(f"option {key!r} is for provider {provider!r}, which is not configured")
            out[provider][name] = value
        elif len(gpu) == 1:
            out[gpu[0]][key] = value
        elif gpu:
            target = "tensorrt" if key.startswith("trt_") else "cuda"
            if target in out:
                out[target][key] = value
    return {p: o for p, o in out.items() if o}


def needs_fp16_model(config: OrtConfig) -> bool:
    """fp16 on the CUDA provider needs an fp16 graph (it has no precision switch; TensorRT has one)."""
    return config.fp16 and "cuda" in config.providers and "tensorrt" not in config.providers


def fp16_model(model: Path | bytes) -> bytes:
    """The model with fp16 weights and activations, fp32 inputs and outputs (onnxconverter-common)."""
    try:
        import onnx
        from onnxconverter_common import float16
    except ImportError:
        raise EngineError(f"--fp16 on the CUDA provider converts the model: {GPU_HINT}") from None
    proto = onnx.load(str(model)) if isinstance(model, Path) else onnx.load_model_from_string(model)
    return bytes(float16.convert_float_to_float16(proto, keep_io_types=True).SerializeToString())


def trt_profile_options(inputs: Sequence[TensorSpec], config: OrtConfig) -> dict[str, str]:
    """trt_profile_{min,opt,max}_shapes strings for the dynamic batch, built from the model's inputs.

    Empty when the model has a fixed batch or a dynamic non-batch dim without a configured shape (then ORT
    derives profiles from the shapes it sees, at the cost of rebuilds).
    """
    fixed = shapes_by_input(config.input_shapes)
    mins, opts, maxs = [], [], []
    opt = config.opt_batch or max(config.min_batch, config.max_batch // 2)
    for spec in inputs:
        if not spec.shape:
            return {}
        dim0 = spec.shape[0]
        if isinstance(dim0, int) and dim0 > 0:
            return {}
        given = [list(s[1:]) for s in fixed[spec.name]] if spec.name in fixed else [list(spec.shape[1:])]
        if not all(isinstance(d, int) and d > 0 for rest in given for d in rest):
            return {}
        # several configured shapes (the detector's letterboxes) span the profile: min/max per dim
        lo = [min(col) for col in zip(*given, strict=True)]
        hi = [max(col) for col in zip(*given, strict=True)]

        def tail(dims: Sequence[int | str | None]) -> str:
            return "".join(f"x{d}" for d in dims)

        mins.append(f"{spec.name}:{config.min_batch}{tail(lo)}")
        opts.append(f"{spec.name}:{opt}{tail(given[0])}")
        maxs.append(f"{spec.name}:{config.max_batch}{tail(hi)}")
    return {
        "trt_profile_min_shapes": ",".join(mins),
        "trt_profile_opt_shapes": ",".join(opts),
        "trt_profile_max_shapes": ",".join(maxs),
    }


def provider_options(config: OrtConfig, inputs: Sequence[TensorSpec]) -> list[tuple[str, dict[str, str]]]:
    """(ORT provider name, options) in priority order, ready for `InferenceSession(providers=...)`."""
    if config.cudnn_conv_algo_search not in CUDNN_SEARCH:
        raise EngineError(
            f"cudnn_conv_algo_search must be one of {CUDNN_SEARCH}, got {config.cudnn_conv_algo_search!r}"
        )
    result: list[tuple[str, dict[str, str]]] = []
    for short, name in zip(config.providers, resolve_providers(config.providers), strict=True):
        opts: dict[str, str] = {}
        if short == "cuda":
            opts = {
                "device_id": str(config.device_id),
                "cudnn_conv_algo_search": config.cudnn_conv_algo_search,
            }
        elif short == "tensorrt":
            opts = {
                "device_id": str(config.device_id),
                "trt_fp16_enable": "1" if config.fp16 else "0",
                "trt_max_workspace_size": str(int(config.trt_workspace_gb * (1 << 30))),
            }
            if config.trt_engine_cache_dir is not None:
                opts["trt_engine_cache_enable"] = "1"
                opts["trt_engine_cache_path"] = str(config.trt_engine_cache_dir)
            if config.trt_timing_cache_dir is not None:
                opts["trt_timing_cache_enable"] = "1"
                opts["trt_timing_cache_path"] = str(config.trt_timing_cache_dir)
            opts.update(trt_profile_options(inputs, config))
        opts.update(config.extra.get(short, {}))
        result.append((name, opts))
    return result


def onnx_input_specs(model: Path | bytes) -> tuple[TensorSpec, ...]:
    """Graph inputs read from the ONNX file (needed before the session exists, for TensorRT profiles)."""
    import onnx

    proto = (
        onnx.load(str(model), load_external_data=False)
        if isinstance(model, Path)
        else onnx.load_model_from_string(model)
    )
    inits = {i.name for i in proto.graph.initializer}
    specs: list[TensorSpec] = []
    for v in proto.graph.input:
        if v.name in inits:
            continue
        dims = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in v.type.tensor_type.shape.dim
        )
        specs.append(TensorSpec(v.name, onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type), dims))
    return tuple(specs)


def batch_range_of(inputs: Sequence[TensorSpec], max_batch: int) -> BatchRange:
    """A fixed dim 0 pins the batch; a symbolic one allows 1..max_batch."""
    dim0 = inputs[0].shape[0] if inputs and inputs[0].shape else 1
    fixed = dim0 if isinstance(dim0, int) and dim0 > 0 else None
    return BatchRange(fixed, fixed) if fixed else BatchRange(1, max_batch)


class OrtEngine(DescribedEngine):
    def __init__(self, model: Path | bytes, config: OrtConfig = OrtConfig(), name: str | None = None) -> None:
        import onnxruntime as ort

        self._name = name or (model.stem if isinstance(model, Path) else "onnx")
        if isinstance(model, Path) and not model.is_file():
            raise EngineError(f"{self._name}: model file not found: {model}")
        opts = ort.SessionOptions()
        if config.intra_op_threads:
            opts.intra_op_num_threads = config.intra_op_threads
        opts.inter_op_num_threads = config.inter_op_threads
        spin = "1" if config.allow_spinning else "0"
        opts.add_session_config_entry("session.intra_op.allow_spinning", spin)
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        check_available(resolve_providers(config.providers), ort.get_available_providers())
        needs_inputs = "tensorrt" in config.providers
        specs = onnx_input_specs(model) if needs_inputs else ()
        providers = provider_options(config, specs)
        for cache in (config.trt_engine_cache_dir, config.trt_timing_cache_dir):
            if cache is not None and "tensorrt" in config.providers:
                cache.mkdir(parents=True, exist_ok=True)
        src: str | bytes = str(model) if isinstance(model, Path) else model
        if needs_fp16_model(config):
            src = fp16_model(model)
        try:
            session: Any = ort.InferenceSession(src, sess_options=opts, providers=providers)
        except Exception as e:  # ORT raises its own exception types
            raise EngineError(f"{self._name}: cannot load model: {e}") from None
        self._providers = tuple(session.get_providers())
        check_loaded(self._name, [name for name, _ in providers], self._providers)
        self._session: Any | None = session
        self._inputs = tuple(TensorSpec(i.name, i.type, _dims(i.shape)) for i in session.get_inputs())
        self._outputs = tuple(TensorSpec(o.name, o.type, _dims(o.shape)) for o in session.get_outputs())
        self._batch = batch_range_of(self._inputs, config.max_batch)
        self._lock = threading.Lock()

    @property
    def providers(self) -> tuple[str, ...]:
        """Providers the session actually uses (ORT may fall back), in priority order."""
        return self._providers

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        session = self._session  # a run in flight keeps its session alive across a concurrent close()
        if session is None:
            raise EngineError(f"{self._name}: engine is closed")
        try:
            results = session.run(None, inputs)
        except Exception as e:
            raise EngineError(f"{self._name}: inference failed: {e}") from None
        return {spec.name: np.asarray(r) for spec, r in zip(self._outputs, results, strict=True)}

    def close(self) -> None:
        with self._lock:
            self._session = None
