"""Offline benchmark: the face pipeline in-process, without WebRTC, over test case x resolution x batch size.

It separates what the models cost from what the network and codecs cost. A batch of B frames stands for B
sessions meeting in the scheduler (each with its own FaceTrack), fed flat out from the same synthetic loop
the live load generator sends. Per run: each stage's time, frames/s, peak RSS and VRAM, process CPU and,
with --cold, the time to the first batch; same report schema as the live runs (loadgen.report).
`--quality` writes the quality report instead (`python -m bench.quality`). `run_benchmark` returns data;
only `main` prints. Example: `python -m bench.benchmark --test-cases single_face --resolutions 640x360`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from engines.engine import EngineError
from engines.factory import EngineConfig
from engines.frames import PROCESSORS, FaceTrack, FrameItem, FrameOptions, SourceFace
from engines.models.store import ModelStore, ModelUnavailable, default_model_dir
from engines.pipeline import Pipeline, PipelineConfig
from loadgen.arguments import parse_resolution
from loadgen.fingerprint import host_fingerprint
from loadgen.media import MediaUnavailable, default_media_dir, media_path
from loadgen.percentiles import summary
from loadgen.report import build_report, latency_dict, write_json
from loadgen.stats import LatencySummary
from loadgen.synth import TEST_CASES, SynthConfig, build_loop


@dataclass(frozen=True)
class BenchmarkConfig:
    test_cases: tuple[str, ...] = ("single_face",)
    resolutions: tuple[tuple[int, int], ...] = ((640, 360),)
    durations: tuple[float, ...] = (10.0,)
    batch_sizes: tuple[int, ...] = (1,)
    processors: tuple[str, ...] = ("face_swapper",)
    engine: EngineConfig = field(default_factory=EngineConfig)
    warmup_s: float = 2.0
    cold: bool = False
    budget_ms: float = 150.0
    loop_frames: int = 30
    fps: float = 30.0  # only shapes the synthetic motion; the benchmark runs as fast as it can


@dataclass(frozen=True)
class BenchProgress:
    run: str
    done_s: float
    total_s: float
    frames: int


class PeakVram:
    """Peak GPU memory of this process (NVML); None without an NVIDIA GPU."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handles: list[Any] = []
        self.peak: int | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # no library, no driver, no device: VRAM is not applicable
            self._nvml = None

    def sample(self) -> None:
        if self._nvml is None:
            return
        pid, used = os.getpid(), 0
        for h in self._handles:
            try:
                procs = self._nvml.nvmlDeviceGetComputeRunningProcesses(h)
            except Exception:
                continue
            used += sum(int(p.usedGpuMemory or 0) for p in procs if p.pid == pid)
        self.peak = max(self.peak or 0, used)

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
            self._nvml = None


def _stage_summary(values: list[float]) -> dict[str, float]:
    return summary(values, {"mean": "mean", "p50": 50, "p95": 95}, 3)


def _read_rgb(path: Path) -> np.ndarray:
    import cv2

    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise MediaUnavailable(f"cannot read {path}")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


class _Feeder:
    """B simulated sessions, each with its own FaceTrack, walking the precomputed loop."""

    def __init__(
        self, frames: list[np.ndarray], source: SourceFace, options: FrameOptions, batch: int
    ) -> None:
        self.frames = frames
        self.source = source
        self.options = options
        self.tracks = [FaceTrack() for _ in range(batch)]
        self.counter = 0

    def items(self) -> list[FrameItem]:
        """Each session advances one frame per call (as a live session does), sessions spread over the loop.
        (Advancing each session by B frames per call made every session's face move B times too fast, which
        tracked sessions see as lost faces.)"""
        n, b = len(self.frames), len(self.tracks)
        out = [
            FrameItem(self.frames[(self.counter + k * n // b) % n], self.source, self.options, track)
            for k, track in enumerate(self.tracks)
        ]
        self.counter += 1
        return out


def _measure(
    pipeline: Pipeline,
    feeder: _Feeder,
    name: str,
    duration: float,
    vram: PeakVram,
    on_progress: Callable[[BenchProgress], None] | None,
) -> dict[str, Any]:
    proc = psutil.Process()
    call_ms: list[float] = []
    stages: dict[str, list[float]] = {}
    faces: list[int] = []
    batch_seen: dict[str, int] = {}
    rss_peak = proc.memory_info().rss
    cpu0 = proc.cpu_times()
    t0 = time.perf_counter()
    next_progress = t0
    while (now := time.perf_counter()) - t0 < duration:
        outs = pipeline.process(feeder.items())
        call_ms.append((time.perf_counter() - now) * 1000.0)
        for stage, ms in outs[0].timings_ms.items():
            stages.setdefault(stage, []).append(ms)
        for stage, n in outs[0].batch_sizes.items():
            batch_seen[stage] = max(batch_seen.get(stage, 0), n)
        faces.extend(o.faces for o in outs)
        rss_peak = max(rss_peak, proc.memory_info().rss)
        vram.sample()
        if on_progress is not None and now >= next_progress:
            on_progress(BenchProgress(name, now - t0, duration, len(call_ms) * len(feeder.tracks)))
            next_progress = now + 0.5
    elapsed = time.perf_counter() - t0
    cpu1 = proc.cpu_times()
    cpu_s = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    n_frames = len(call_ms) * len(feeder.tracks)
    return {
        "call_ms": call_ms,
        "stages": stages,
        "faces": faces,
        "batch_seen": batch_seen,
        "rss_peak": rss_peak,
        "elapsed": elapsed,
        "cpu_s": cpu_s,
        "frames": n_frames,
    }


def run_benchmark(
    config: BenchmarkConfig,
    store: ModelStore,
    media_root: Path,
    on_progress: Callable[[BenchProgress], None] | None = None,
) -> list[dict[str, Any]]:
    """Every matrix cell's report entry (see loadgen.report for the fields)."""
    source_image = _read_rgb(media_path(media_root, "astronaut.png"))
    vram = PeakVram()
    runs: list[dict[str, Any]] = []
    pipeline: Pipeline | None = None
    pcfg = PipelineConfig(processors=config.processors, engine=config.engine)
    options = FrameOptions(processors=config.processors)
    try:
        for batch in config.batch_sizes:
            for w, h in config.resolutions:
                for case in config.test_cases:
                    loop = build_loop(SynthConfig(w, h, config.fps, case, config.loop_frames), media_root)
                    frames = [loop.rgb(i) for i in range(len(loop))]
                    for duration in config.durations:
                        name = f"{case}-{w}x{h}-{duration:g}s-b{batch}"
                        cold_ms: float | None = None
                        t_cold = time.perf_counter()
                        if pipeline is None or config.cold:
                            if pipeline is not None:
                                pipeline.close()
                            pipeline = Pipeline.from_config(pcfg, store)
                            if not config.cold:
                                pipeline.warmup()
                        source = pipeline.prepare_source(source_image, "bench-source")
                        feeder = _Feeder(frames, source, options, batch)
                        if config.cold:
                            pipeline.process(feeder.items())
                            cold_ms = (time.perf_counter() - t_cold) * 1000.0
                        end_warm = time.perf_counter() + config.warmup_s
                        while time.perf_counter() < end_warm:
                            pipeline.process(feeder.items())
                        m = _measure(pipeline, feeder, name, duration, vram, on_progress)
                        elapsed = m["elapsed"]
                        lat = LatencySummary.of(m["call_ms"], config.budget_ms)
                        runs.append(
                            {
                                "name": name,
                                "test_case": case,
                                "resolution": f"{w}x{h}",
                                "batch_size": batch,
                                "processors": list(config.processors),
                                "duration_s": round(elapsed, 3),
                                "calls": len(m["call_ms"]),
                                "frames": m["frames"],
                                "frames_per_s": round(m["frames"] / elapsed, 3) if elapsed > 0 else 0.0,
                                "latency_ms": latency_dict(lat),
                                "within_budget": lat.within_budget,
                                "budget_ms": config.budget_ms,
                                "stages_ms": {s: _stage_summary(v) for s, v in m["stages"].items()},
                                "stage_batch_max": m["batch_seen"],
                                "faces_per_frame_mean": (
                                    round(float(np.mean(m["faces"])), 3) if m["faces"] else 0.0
                                ),
                                "peak_rss_bytes": int(m["rss_peak"]),
                                "peak_vram_bytes": vram.peak,
                                "cpu_percent": round(100.0 * m["cpu_s"] / elapsed, 1)
                                if elapsed > 0
                                else None,
                                "cold_start_ms": None if cold_ms is None else round(cold_ms, 1),
                                "slo_met": lat.p95 is not None and lat.p95 <= config.budget_ms,
                            }
                        )
    finally:
        if pipeline is not None:
            pipeline.close()
        vram.close()
    return runs


def _csv(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.benchmark",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--test-cases", type=_csv, default=("single_face",))
    p.add_argument("--resolutions", type=parse_resolution, nargs="+", default=[(640, 360)])
    p.add_argument("--durations", type=float, nargs="+", default=[10.0])
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1])
    p.add_argument("--processors", type=_csv, default=("face_swapper",))
    p.add_argument("--engine", default="onnxruntime", help="engine backend: onnxruntime | tensorrt | torch")
    p.add_argument(
        "--providers", type=_csv, default=("cpu",), help="ORT providers: cpu,cuda,tensorrt; torch: cpu | cuda"
    )
    p.add_argument("--fp16", action="store_true", help="FP16 engines (torch, ORT CUDA/TensorRT)")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds run before measuring each cell")
    p.add_argument(
        "--cold", action="store_true", help="build a fresh pipeline per cell and time its first batch"
    )
    p.add_argument("--budget-ms", type=float, default=150.0)
    p.add_argument(
        "--output",
        metavar="FILE.json",
        type=Path,
        default=Path("benchmark_result.json"),
        help="JSON report (default benchmark_result.json in the current folder)",
    )
    p.add_argument("--output-report", dest="output", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--media-dir", type=Path)
    p.add_argument("--model-dir", type=Path)
    p.add_argument("--no-progress", action="store_true")
    return p


_SHORT = {
    "face_detector": "det",
    "face_landmarker": "lmk",
    "face_swapper": "swp",
    "face_enhancer": "enh",
    "paste_back": "pst",
}


def _table(runs: Sequence[dict[str, Any]]) -> Any:
    from rich.table import Table

    t = Table(title="pipeline benchmark")
    t.add_column("run", no_wrap=True)
    for col in ("frames/s", "p50 ms", "p95 ms", "cpu %", "rss MiB", "stages p50 ms"):
        t.add_column(col, justify="right")
    for r in runs:
        stages = " ".join(f"{_SHORT.get(k, k)}={v['p50']:.1f}" for k, v in r["stages_ms"].items())
        lat = r["latency_ms"]
        t.add_row(
            r["name"],
            f"{r['frames_per_s']:.1f}",
            f"{lat['p50'] or 0:.1f}",
            f"{lat['p95'] or 0:.1f}",
            f"{r['cpu_percent'] or 0:.0f}",
            f"{r['peak_rss_bytes'] / 2**20:.0f}",
            stages,
        )
    return t


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    args_in = list(sys.argv[1:] if argv is None else argv)
    if "--quality" in args_in:  # the quality report (contact sheet + metrics), not the timing matrix
        from bench.quality.command import main as quality_main

        return quality_main(
            [a for a in args_in if a != "--quality"], prog="python -m bench.benchmark --quality"
        )
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    err = Console(stderr=True)
    bad = [c for c in args.test_cases if c not in TEST_CASES]
    bad += [p for p in args.processors if p not in PROCESSORS]
    if bad or min(args.batch_sizes) < 1 or min(args.durations) <= 0:
        err.print(f"error: bad test cases/processors {bad} or non-positive batch sizes/durations")
        return 2
    config = BenchmarkConfig(
        test_cases=tuple(args.test_cases),
        resolutions=tuple(args.resolutions),
        durations=tuple(args.durations),
        batch_sizes=tuple(args.batch_sizes),
        processors=tuple(args.processors),
        engine=EngineConfig(
            backend=args.engine,
            providers=tuple(args.providers),
            max_batch=max(args.batch_sizes),
            fp16=args.fp16,
        ),
        warmup_s=args.warmup,
        cold=args.cold,
        budget_ms=args.budget_ms,
    )
    store = ModelStore(args.model_dir or default_model_dir(os.environ))
    media_root = args.media_dir or default_media_dir(os.environ)
    total = len(config.test_cases) * len(config.resolutions) * len(config.batch_sizes) * sum(config.durations)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=args.no_progress,
    ) as bar:
        task = bar.add_task("benchmark", total=total)
        done_before: dict[str, float] = {}

        def on_progress(p: BenchProgress) -> None:
            done_before[p.run] = p.done_s
            bar.update(task, completed=sum(done_before.values()), description=f"{p.run} {p.frames} frames")

        try:
            runs = run_benchmark(config, store, media_root, on_progress)
        except (ModelUnavailable, MediaUnavailable, EngineError) as e:  # e.g. a GPU backend without a GPU
            err.print(f"error: {e}")
            return 2
    cfg_dict = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    report = build_report("benchmark", host_fingerprint(), cfg_dict, runs)
    write_json(report, args.output)
    out = Console() if sys.stdout.isatty() else Console(width=150)
    out.print(_table(runs))
    out.print(f"report: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
