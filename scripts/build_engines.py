#!/usr/bin/env python3
"""Build TensorRT plans from ONNX models, and make fixed-batch ONNX models batch-dynamic.

Why a script and not a runtime step: a TensorRT build takes minutes and its plan is tied to one TensorRT
version and GPU architecture, so plans are built once per machine into the plan directory the gateway reads
(`EngineConfig.trt_cache_dir`). It also writes Triton model repositories (engines/triton/repository.py) and
converts models to FP16 for TensorRT >= 11, which dropped the FP16 builder flag (`--to-fp16`, with
onnxconverter-common). Examples: `build_engines.py --help`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engines.backends.graph_keys import shapes_by_input
from engines.backends.trt_planning import (
    BatchProfile,
    PlanKey,
    parse_shape_arg,
    profile_shapes,
    trt_version_tag,
)
from engines.engine import EngineError

GPU_HINT = "TensorRT backend needs an NVIDIA GPU and `pip install 'livefuse[gpu]'`"


class BuildError(Exception):
    """A build step failed; the message is the one line the CLI prints."""


@dataclass(frozen=True)
class BuildOptions:
    onnx_path: Path
    out_dir: Path
    model: str
    profile: BatchProfile
    profiles: int
    precision: str
    workspace_gb: float
    timing_cache: Path | None
    shapes: dict[str, list[tuple[int, ...]]]  # several shapes per input span its profile
    device_id: int


def make_batch_dynamic_file(
    src: Path, dst: Path, dim_name: str, verify: bool, batches: Sequence[int]
) -> float | None:
    from engines.onnx.batch import make_batch_dynamic_bytes, verify_batch_equivalence

    if not src.is_file():
        raise BuildError(f"no such ONNX file: {src}")
    data = src.read_bytes()
    try:
        out = make_batch_dynamic_bytes(data, dim_name)
    except ValueError as e:
        raise BuildError(f"{src.name}: {e}") from None
    diff = verify_batch_equivalence(data, out, batch_sizes=tuple(batches)) if verify else None
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(out)
    return diff


def convert_to_fp16(src: Path, dst: Path) -> None:
    try:
        from onnxconverter_common import float16
    except ImportError:
        raise BuildError("--to-fp16 needs `pip install onnxconverter-common`") from None
    import onnx

    model = onnx.load(str(src))
    onnx.save(float16.convert_float_to_float16(model, keep_io_types=True), str(dst))


def _onnx_is_fp16(path: Path) -> bool:
    import onnx
    from onnx import TensorProto

    model = onnx.load(str(path), load_external_data=False)
    return any(i.data_type == TensorProto.FLOAT16 for i in model.graph.initializer)


def _onnx_inputs(path: Path) -> list[tuple[str, list[int | str | None]]]:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    result: list[tuple[str, list[int | str | None]]] = []
    for v in model.graph.input:
        if v.name in inits:
            continue
        dims: list[int | str | None] = [
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in v.type.tensor_type.shape.dim
        ]
        result.append((v.name, dims))
    return result


def build_plan(opts: BuildOptions) -> Path:
    """Parse the ONNX, add `opts.profiles` copies of the batch profile (one per concurrent execution context,
    as TensorRT asks), build and serialize. Returns the plan path."""
    try:
        import tensorrt as trt
    except ImportError:
        raise BuildError(GPU_HINT) from None
    from engines.backends.tensorrt_engine import device_compute_capability

    inputs = _onnx_inputs(opts.onnx_path)
    dim0 = inputs[0][1][0] if inputs and inputs[0][1] else None
    if isinstance(dim0, int) and dim0 > 0 and opts.profile.max > 1:
        raise BuildError(f"{opts.onnx_path.name} has a fixed batch of {dim0}: run --make-batch-dynamic first")
    try:
        shapes = profile_shapes(inputs, opts.profile, opts.shapes)
    except ValueError as e:
        raise BuildError(str(e)) from None

    cc = device_compute_capability(opts.device_id)
    version = trt_version_tag(trt.__version__)
    key = PlanKey(opts.model, version, cc, opts.precision, opts.profile.min, opts.profile.max)

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(opts.onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise BuildError(f"TensorRT cannot parse {opts.onnx_path.name}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(opts.workspace_gb * (1 << 30)))
    if opts.precision == "fp16":
        if hasattr(trt.BuilderFlag, "FP16"):
            config.set_flag(trt.BuilderFlag.FP16)
        elif not _onnx_is_fp16(opts.onnx_path):
            raise BuildError(
                f"TensorRT {trt.__version__} has no FP16 builder flag: convert the model first "
                f"(`build_engines.py --to-fp16 {opts.onnx_path} FP16.onnx`) and build that"
            )
    cache_bytes = opts.timing_cache.read_bytes() if opts.timing_cache and opts.timing_cache.exists() else b""
    timing_cache = config.create_timing_cache(cache_bytes)
    config.set_timing_cache(timing_cache, ignore_mismatch=False)
    for _ in range(opts.profiles):
        profile = builder.create_optimization_profile()
        for name, (mn, op, mx) in shapes.items():
            profile.set_shape(name, mn, op, mx)
        config.add_optimization_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BuildError(f"TensorRT failed to build {opts.onnx_path.name} (see the log above)")
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    plan = opts.out_dir / key.filename()
    plan.write_bytes(bytes(serialized))
    if opts.timing_cache is not None:
        opts.timing_cache.parent.mkdir(parents=True, exist_ok=True)
        opts.timing_cache.write_bytes(bytes(config.get_timing_cache().serialize()))
    return plan


def batch_profile(args: argparse.Namespace) -> BatchProfile:
    """--min-batch / --opt-batch (default max/2) / --max-batch as a profile (ValueError when out of order)."""
    opt = args.opt_batch or max(args.min_batch, args.max_batch // 2)
    return BatchProfile(args.min_batch, opt, args.max_batch)


def build_triton_repository(args: argparse.Namespace) -> list[str]:
    """Write the Triton repository; returns one line per model (written or skipped, and why)."""
    import os

    from engines.models.store import default_model_dir
    from engines.triton.repository import RepositoryConfig, build_pipeline_repository

    kind = args.kind or {"python": "KIND_CPU", "tensorrt": "KIND_GPU"}.get(args.backend, "KIND_AUTO")
    preferred = (
        tuple(args.preferred_batch)
        if args.preferred_batch is not None
        else tuple(sorted({max(1, args.max_batch // 4), max(1, args.max_batch // 2)}))
    )
    try:
        config = RepositoryConfig(
            args.backend,
            args.max_batch,
            preferred,
            args.max_queue_delay_us,
            args.instances,
            kind,
            args.intra_op_threads,
        )
        shapes = shapes_by_input([parse_shape_arg(s) for s in args.shape])
    except ValueError as e:
        raise BuildError(str(e)) from None

    def plan_builder(onnx_path: Path, plan_path: Path) -> None:
        opts = BuildOptions(
            onnx_path,
            plan_path.parent / "build",
            plan_path.parent.parent.name,
            batch_profile(args),
            max(1, args.instances),
            args.precision,
            args.workspace_gb,
            args.timing_cache,
            shapes,
            args.device,
        )
        built = build_plan(opts)
        built.replace(plan_path)
        built.parent.rmdir()

    models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
    try:
        model_dir = args.model_dir or default_model_dir(os.environ)
        return build_pipeline_repository(args.triton_repository, model_dir, config, models, plan_builder)
    except ValueError as e:
        raise BuildError(str(e)) from None


EXAMPLES = """examples:
  build_engines.py --make-batch-dynamic face_landmark_468.onnx face_landmark_468.dyn.onnx   (no GPU needed)
  build_engines.py retinaface_mnet025.onnx --shape input:1x3x640x640 --max-batch 16 --out-dir plans/
  build_engines.py inswapper_128.dyn.onnx --precision fp16 --timing-cache plans/timing.cache
  build_engines.py --triton-repository repo/ --backend python            (CPU; the nvidia-pytriton wheel)
  build_engines.py --triton-repository repo/ --backend onnxruntime --instances 2 --kind KIND_GPU
  build_engines.py --triton-repository repo/ --backend tensorrt --precision fp16 --shape input:1x3x640x640

Plans are named <model>.trt<version>.sm<cc>.<precision>.b<min>-<max>.plan. FP16: TensorRT 10 sets its FP16
builder flag; TensorRT >= 11 builds strongly typed networks, so the ONNX itself must be FP16 (--to-fp16 IN
OUT, with `pip install onnxconverter-common`; inputs and outputs stay FP32).
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="build_engines.py",
        description="ONNX -> TensorRT plans with a dynamic-batch optimization profile; "
        "fixed-batch ONNX -> dynamic batch (no GPU needed).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("onnx", nargs="*", type=Path, help="ONNX models to build plans for")
    p.add_argument(
        "--make-batch-dynamic",
        nargs=2,
        metavar=("IN", "OUT"),
        type=Path,
        help="rewrite a batch-1 ONNX so dim 0 is dynamic (constants included), verify, write OUT",
    )
    p.add_argument("--dim-name", default="N", help="symbolic batch dim name (default N)")
    p.add_argument("--no-verify", action="store_true", help="skip the batched-vs-single ORT check")
    p.add_argument("--verify-batches", type=int, nargs="+", default=[1, 3], help="batch sizes to verify")
    p.add_argument(
        "--to-fp16",
        nargs=2,
        metavar=("IN", "OUT"),
        type=Path,
        help="convert an ONNX to FP16 weights (FP32 I/O) for TensorRT >= 11",
    )
    p.add_argument("--out-dir", type=Path, default=Path("plans"), help="plan directory (default ./plans)")
    p.add_argument("--model", help="model name in the plan file (default: the ONNX file's stem up to a dot)")
    p.add_argument("--min-batch", type=int, default=1)
    p.add_argument("--opt-batch", type=int, default=None, help="batch TensorRT tunes for (default: max/2)")
    p.add_argument("--max-batch", type=int, default=16)
    p.add_argument(
        "--profiles",
        type=int,
        default=2,
        help="copies of the profile, one per concurrent execution context (default 2)",
    )
    p.add_argument("--workspace-gb", type=float, default=4.0, help="builder workspace limit in GiB")
    p.add_argument("--timing-cache", type=Path, default=None, help="timing cache file (read and updated)")
    p.add_argument("--precision", choices=("fp32", "fp16"), default="fp32")
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME:DxDxD",
        help="shape of an input with dynamic non-batch dims (batch value ignored); repeat it "
        "for the same input to span several (the profile takes each dim's min..max)",
    )
    p.add_argument("--device", type=int, default=0, help="CUDA device id")
    t = p.add_argument_group("Triton model repository")
    t.add_argument(
        "--triton-repository",
        type=Path,
        metavar="DIR",
        help="write a Triton model repository for the pipeline's models (those in the cache)",
    )
    t.add_argument(
        "--backend",
        choices=("python", "onnxruntime", "tensorrt"),
        default="python",
        help="Triton backend: python = ONNX Runtime inside Triton's Python backend (CPU builds); "
        "onnxruntime; tensorrt = plans built here (default python)",
    )
    t.add_argument("--models", help="comma list of pipeline engines (default: all whose model is present)")
    t.add_argument("--model-dir", type=Path, help="model cache (default: $LIVEFUSE_MODEL_DIR)")
    t.add_argument("--instances", type=int, default=1, help="instance_group count per model (default 1)")
    t.add_argument(
        "--kind",
        choices=("KIND_CPU", "KIND_GPU", "KIND_AUTO"),
        default=None,
        help="instance kind (default KIND_CPU for python, KIND_GPU for tensorrt, KIND_AUTO else)",
    )
    t.add_argument(
        "--preferred-batch",
        type=int,
        nargs="*",
        default=None,
        help="dynamic_batching preferred sizes (default: max/4 and max/2)",
    )
    t.add_argument(
        "--max-queue-delay-us",
        type=int,
        default=2000,
        help="how long Triton holds a request for batch partners (default 2000)",
    )
    t.add_argument("--intra-op-threads", type=int, default=1, help="python backend: ORT threads per instance")
    return p


def run(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.onnx and not args.make_batch_dynamic and not args.to_fp16 and not args.triton_repository:
        _parser().error(
            "nothing to do: give ONNX files, --make-batch-dynamic IN OUT, --to-fp16 IN OUT "
            "or --triton-repository DIR"
        )
    if args.triton_repository:
        for line in build_triton_repository(args):
            print(line)
    if args.make_batch_dynamic:
        src, dst = args.make_batch_dynamic
        diff = make_batch_dynamic_file(src, dst, args.dim_name, not args.no_verify, args.verify_batches)
        check = (
            "not verified"
            if diff is None
            else (
                f"batches {','.join(map(str, args.verify_batches))} match single runs, "
                f"max abs diff {diff:.3g}"
            )
        )
        print(f"{dst}: batch-dynamic ({check})")
    if args.to_fp16:
        convert_to_fp16(*args.to_fp16)
        print(f"{args.to_fp16[1]}: FP16 weights, FP32 inputs/outputs")
    if args.onnx:
        try:
            profile = batch_profile(args)
            shapes = shapes_by_input([parse_shape_arg(s) for s in args.shape])
        except ValueError as e:
            raise BuildError(str(e)) from None
        for path in args.onnx:
            if not path.is_file():
                raise BuildError(f"no such ONNX file: {path}")
            opts = BuildOptions(
                path,
                args.out_dir,
                args.model or path.name.split(".")[0],
                profile,
                max(1, args.profiles),
                args.precision,
                args.workspace_gb,
                args.timing_cache,
                shapes,
                args.device,
            )
            print(f"{build_plan(opts)}: built")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except (BuildError, EngineError) as e:
        print(f"build_engines: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # verification failures and ONNX errors: one line, not a traceback
        print(f"build_engines: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
