"""Write a Triton model repository for the pipeline's models: one directory per engine, `config.pbtxt` + file.

Directories carry the pipeline's engine names, so `TritonEngine` finds a stage's model under `<prefix><name>`.
Backends: `onnxruntime` (`model.onnx` on Triton's ONNX Runtime backend), `tensorrt` (`model.plan`, built on
the serving node because a plan is tied to one TensorRT version and GPU) and `python` (`python_model.py`
running `model.onnx` on ONNX Runtime inside Triton, for CPU-only builds such as the `nvidia-pytriton` wheel).
Fixed-batch-1 exports are made batch-dynamic first (engines.onnx.batch, verified item by item) so Triton's
dynamic batcher can merge frames. `render_config` is pure and tested without Triton.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

BACKENDS = ("onnxruntime", "tensorrt", "python")

# ONNX TensorProto element type names -> Triton config data types
TRITON_DTYPES = {
    "FLOAT": "TYPE_FP32",
    "FLOAT16": "TYPE_FP16",
    "DOUBLE": "TYPE_FP64",
    "INT64": "TYPE_INT64",
    "INT32": "TYPE_INT32",
    "INT8": "TYPE_INT8",
    "UINT8": "TYPE_UINT8",
    "BOOL": "TYPE_BOOL",
}

# the pipeline's engine name -> model id in the store
PIPELINE_MODELS: tuple[tuple[str, str], ...] = (
    ("face_detector", "retinaface_mnet025"),
    ("face_landmarker", "facemesh_468"),
    ("face_swapper", "inswapper_128"),
    ("arcface", "arcface_w600k_r50"),
    ("face_enhancer", "gfpgan_1.4"),
)


@dataclass(frozen=True)
class TensorDecl:
    name: str
    data_type: str  # TYPE_FP32 ...
    dims: tuple[int, ...]  # without the batch dim; -1 = dynamic


@dataclass(frozen=True)
class RepositoryConfig:
    backend: str = "python"
    max_batch: int = 16
    preferred_batch_sizes: tuple[int, ...] = (4, 8)
    max_queue_delay_us: int = 2000  # how long Triton holds a request for batch partners
    instances: int = 1  # instance_group count; on a GPU several instances = several streams
    kind: str = "KIND_CPU"  # KIND_CPU | KIND_GPU | KIND_AUTO
    intra_op_threads: int = 1  # python backend: ONNX Runtime threads per instance
    gpus: tuple[int, ...] = ()  # KIND_GPU: device ids (empty = all)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.max_batch < 1 or self.instances < 1 or self.max_queue_delay_us < 0:
            raise ValueError("max_batch and instances must be >= 1, max_queue_delay_us >= 0")
        if any(not 1 <= p <= self.max_batch for p in self.preferred_batch_sizes):
            raise ValueError(f"preferred batch sizes must lie in 1..{self.max_batch}")
        if self.kind not in ("KIND_CPU", "KIND_GPU", "KIND_AUTO"):
            raise ValueError(f"instance kind must be KIND_CPU, KIND_GPU or KIND_AUTO, got {self.kind!r}")


def decls_from_onnx(path: Path) -> tuple[tuple[TensorDecl, ...], tuple[TensorDecl, ...]]:
    """Graph inputs (minus initializers) and outputs as Triton declarations; dim 0 must be the batch."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}

    def decl(v: onnx.ValueInfoProto) -> TensorDecl:
        elem = onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type)
        if elem not in TRITON_DTYPES:
            raise ValueError(f"{path.name}: tensor {v.name} has type {elem}, not supported here")
        dims = [
            d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1
            for d in v.type.tensor_type.shape.dim
        ]
        if not dims:
            raise ValueError(f"{path.name}: tensor {v.name} has no batch dim")
        return TensorDecl(v.name, TRITON_DTYPES[elem], tuple(dims[1:]))

    ins = tuple(decl(v) for v in model.graph.input if v.name not in inits)
    outs = tuple(decl(v) for v in model.graph.output)
    return ins, outs


def _tensor_block(kind: str, decls: Sequence[TensorDecl]) -> str:
    items = []
    for d in decls:
        dims = ", ".join(str(x) for x in d.dims) if d.dims else "1"
        reshape = "\n    reshape: { shape: [ ] }" if not d.dims else ""
        items.append(
            f'  {{\n    name: "{d.name}"\n    data_type: {d.data_type}\n    dims: [ {dims} ]{reshape}\n  }}'
        )
    return f"{kind} [\n" + ",\n".join(items) + "\n]\n"


def render_config(
    name: str, inputs: Sequence[TensorDecl], outputs: Sequence[TensorDecl], config: RepositoryConfig
) -> str:
    """config.pbtxt text (protobuf text format, the form Triton's docs use)."""
    head = {
        "onnxruntime": 'backend: "onnxruntime"\n',
        "tensorrt": 'platform: "tensorrt_plan"\n',
        "python": 'backend: "python"\n',
    }[config.backend]
    preferred = ", ".join(str(p) for p in sorted(set(config.preferred_batch_sizes)))
    on_gpus = config.gpus and config.kind == "KIND_GPU"
    gpus = f"\n    gpus: [ {', '.join(map(str, config.gpus))} ]" if on_gpus else ""
    parts = [
        f'name: "{name}"\n',
        head,
        f"max_batch_size: {config.max_batch}\n",
        _tensor_block("input", inputs),
        _tensor_block("output", outputs),
        "dynamic_batching {\n"
        + (f"  preferred_batch_size: [ {preferred} ]\n" if preferred else "")
        + f"  max_queue_delay_microseconds: {config.max_queue_delay_us}\n}}\n",
        f"instance_group [\n  {{\n    count: {config.instances}\n    kind: {config.kind}{gpus}\n  }}\n]\n",
    ]
    if config.backend == "python":
        parts.append(
            'parameters: {\n  key: "intra_op_threads"\n'
            f'  value: {{ string_value: "{config.intra_op_threads}" }}\n}}\n'
        )
    return "".join(parts)


def write_model(
    repo: Path,
    name: str,
    onnx_path: Path,
    config: RepositoryConfig,
    build_plan: Callable[[Path, Path], None] | None = None,
) -> Path:
    """One model directory: `<repo>/<name>/config.pbtxt` and `<repo>/<name>/1/<model file>`.

    `build_plan(onnx, plan_path)` builds the TensorRT plan (only for backend tensorrt).
    """
    inputs, outputs = decls_from_onnx(onnx_path)
    model_dir = repo / name
    version = model_dir / "1"
    if version.exists():
        shutil.rmtree(version)
    version.mkdir(parents=True)
    if config.backend == "tensorrt":
        if build_plan is None:
            raise ValueError("backend tensorrt needs a plan builder")
        build_plan(onnx_path, version / "model.plan")
    else:
        shutil.copyfile(onnx_path, version / "model.onnx")
        if config.backend == "python":
            shutil.copyfile(Path(__file__).with_name("python_model.py"), version / "model.py")
    (model_dir / "config.pbtxt").write_text(render_config(name, inputs, outputs, config))
    return model_dir


def build_pipeline_repository(
    repo: Path,
    model_dir: Path,
    config: RepositoryConfig,
    models: Sequence[str] | None = None,
    build_plan: Callable[[Path, Path], None] | None = None,
) -> list[str]:
    """Every pipeline model present in the model cache (or exactly `models`) into `repo`; one line each.

    Each goes in as its serving copy (engines.onnx.model_cache: fixed batch made dynamic, PRelu made cheap,
    verified item by item). A model not in the cache is skipped with a line saying so, unless it was asked for
    by name (ValueError).
    """
    from engines.models.store import ModelStore, ModelUnavailable
    from engines.onnx.model_cache import serving_model

    known = [name for name, _ in PIPELINE_MODELS]
    unknown = sorted(set(models or ()) - set(known))
    if unknown:
        raise ValueError(f"unknown model(s) {', '.join(unknown)} (known: {', '.join(known)})")
    store = ModelStore(model_dir)
    lines: list[str] = []
    for name, model_id in PIPELINE_MODELS:
        if models is not None and name not in models:
            continue
        try:
            path = store.require(model_id)
        except ModelUnavailable as e:
            if models is not None:
                raise ValueError(str(e)) from None
            lines.append(f"{name}: skipped ({model_id} not in the cache)")
            continue
        path = serving_model(path)
        model_dir_out = write_model(repo, name, path, config, build_plan)
        lines.append(
            f"{model_dir_out}: {config.backend} ({model_id}, max batch {config.max_batch}, "
            f"{config.instances} x {config.kind})"
        )
    if not any("skipped" not in line for line in lines):
        raise ValueError("no model written: provision models first (`python -m engines.models provision`)")
    return lines
