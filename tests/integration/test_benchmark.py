"""The offline benchmark runs the real pipeline and models over a tiny matrix and writes its report."""

from __future__ import annotations

import json
from pathlib import Path

from bench.benchmark import BenchmarkConfig, BenchProgress, main, run_benchmark
from engines.models.store import ModelStore


def test_run_benchmark_reports_stages_and_throughput(model_store: ModelStore, media_dir: Path) -> None:
    config = BenchmarkConfig(
        test_cases=("single_face", "multi_face"),
        resolutions=((320, 240),),
        durations=(1.0,),
        batch_sizes=(2,),
        warmup_s=0.2,
    )
    seen: list[BenchProgress] = []
    runs = run_benchmark(config, model_store, media_dir, seen.append)
    assert [r["name"] for r in runs] == ["single_face-320x240-1s-b2", "multi_face-320x240-1s-b2"]
    single, multi = runs
    for r in runs:
        assert r["frames"] == 2 * r["calls"] and r["frames"] > 0
        assert r["frames_per_s"] > 0 and r["peak_rss_bytes"] > 0
        assert {"face_detector", "face_landmarker", "face_swapper"} <= set(r["stages_ms"])
        assert r["stage_batch_max"]["face_detector"] == 2  # two frames, one detector batch
        assert r["latency_ms"]["p95"] >= r["latency_ms"]["p50"] > 0
    assert single["faces_per_frame_mean"] == 1.0  # the astronaut
    assert multi["faces_per_frame_mean"] >= 4  # the group photo (six faces; small ones may be missed)
    assert seen and seen[-1].run == "multi_face-320x240-1s-b2"


def test_benchmark_cli_cold_start_and_report(tmp_path: Path, model_store: ModelStore) -> None:
    out = tmp_path / "bench.json"
    code = main(
        [
            "--test-cases",
            "single_face",
            "--resolutions",
            "320x240",
            "--durations",
            "0.5",
            "--batch-sizes",
            "1",
            "--warmup",
            "0",
            "--cold",
            "--output",
            str(out),
            "--no-progress",
            "--model-dir",
            str(model_store.root),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert report["schema_version"] == 1 and report["kind"] == "benchmark"
    assert report["host"]["python"] and report["config"]["batch_sizes"] == [1]
    (run,) = report["runs"]
    assert run["cold_start_ms"] > 0 and run["frames"] > 0


def test_benchmark_cli_usage_error(tmp_path: Path) -> None:
    assert main(["--test-cases", "bogus", "--output", str(tmp_path / "x.json")]) == 2
    assert not (tmp_path / "x.json").exists()
