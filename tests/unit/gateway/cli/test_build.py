"""The CLI edge: defaults < --config FILE.toml < flags; every bad input is one stderr line and exit code 2."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from engines.models.store import ModelStore, default_model_dir
from engines.pipeline import Pipeline
from engines.pipeline_config import PipelineConfig
from gateway.app_resources import default_pipeline
from gateway.cli import UsageError, build_config, build_parser, main
from gateway.cli.build import load_config
from gateway.config import GatewayConfig, SessionConfig, default_parallelism
from gateway.media.late import LatePolicy, repeat_due
from gateway.monitoring.records import Outcome
from gateway.webrtc.interop.ice import LOOPBACK


def _config(argv: list[str], file_values: dict[str, object] | None = None) -> GatewayConfig:
    return build_config(build_parser().parse_args(argv), file_values)


def test_defaults() -> None:
    config = _config([])
    assert config.host == "127.0.0.1" and config.port == 8080
    workers, threads = default_parallelism("onnxruntime", ("cpu",), len(os.sched_getaffinity(0)))
    engine = config.pipeline.engine
    assert replace(config.pipeline, engine=replace(engine, intra_op_threads=0)) == PipelineConfig()
    assert engine.intra_op_threads == threads and config.scheduler.workers == workers
    assert config.model_dir == default_model_dir(os.environ)  # resolved at the CLI edge
    assert config.ice.host_addresses == () and config.auth.token is None
    assert config.sessions.late_policy is LatePolicy.REPEAT


def test_file_overrides_defaults_and_flags_override_file(tmp_path: Path) -> None:
    toml = tmp_path / "gw.toml"
    toml.write_text(
        'port = 9000\nmax-batch = 4\nprocessors = "face_swapper,face_enhancer"\nbudget_ms = 120.0\n'
        'ice-loopback-only = true\nlate_policy = "original"\n'
    )
    import tomllib

    values = tomllib.loads(toml.read_text())
    from_file = _config(["--config", str(toml)], values)
    assert from_file.port == 9000 and from_file.pipeline.engine.max_batch == 4
    assert from_file.scheduler.max_batch == 4 and from_file.scheduler.budget_ms == 120.0
    assert from_file.pipeline.processors == ("face_swapper", "face_enhancer")
    assert from_file.ice.host_addresses == LOOPBACK
    assert from_file.sessions.late_policy is LatePolicy.ORIGINAL
    flags = _config(
        ["--config", str(toml), "--port", "9100", "--max-batch", "2", "--processors", "face_swapper"], values
    )
    assert flags.port == 9100 and flags.pipeline.engine.max_batch == 2 and flags.scheduler.max_batch == 2
    assert flags.pipeline.processors == ("face_swapper",)
    assert flags.scheduler.budget_ms == 120.0  # not on the command line: the file's value stays


def test_main_reads_the_toml_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """main() itself opens --config: a key it does not know is one line and exit 2, not silently ignored."""
    toml = tmp_path / "gw.toml"
    toml.write_text("port = 9000\nmax_bach = 4\n")
    assert main(["--config", str(toml)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "max_bach" in err


def test_face_flags() -> None:
    config = _config(["--mask-regions", "none", "--face-selector", "one", "--poisson-blend"])
    assert config.pipeline.keep_regions == () and config.pipeline.face_selector == "one"
    assert config.pipeline.poisson
    padded = _config(["--mask-blur", "0.2", "--mask-padding", "10,0,5,0"]).pipeline.mask
    assert padded.blur == 0.2 and padded.padding == (10.0, 0.0, 5.0, 0.0)
    assert _config(["--mask-regions", "eyes"]).pipeline.keep_regions == ("eyes",)
    assert _config([]).pipeline.keep_regions == ("mouth", "eyes")


def test_detector_score_reaches_the_pipeline_from_flag_environment_and_file(
    tmp_path: Path, model_store: ModelStore
) -> None:
    """A pipeline option is its field and its declaration: the flag, LIVEFUSE_DETECTOR_SCORE and the TOML key
    all reach the detector the gateway builds."""
    assert _config([]).pipeline.detector_score == PipelineConfig().detector_score
    toml = tmp_path / "gw.toml"
    toml.write_text("detector_score = 0.4\n")
    env = {"LIVEFUSE_DETECTOR_SCORE": "0.6"}
    assert load_config(["--config", str(toml)], {})[0].pipeline.detector_score == 0.4
    assert load_config(["--config", str(toml)], env)[0].pipeline.detector_score == 0.6
    config, _ = load_config(["--config", str(toml), "--detector-score", "0.7"], env)
    pipeline = default_pipeline(replace(config, model_dir=model_store.root))
    try:
        assert isinstance(pipeline, Pipeline)
        assert pipeline.config.detector_score == pipeline.detector.score == 0.7
    finally:
        pipeline.close()


def test_token_file(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("s3cret\n")
    config = _config(["--token-file", str(secret), "--protect-reads"])
    assert config.auth.token == "s3cret" and config.auth.protect_reads


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--bogus"], "--bogus"),
        (["--port", "eighty"], "--port"),
        (["--port", "70000"], "port"),
        (["--engine", "cuda"], "--engine"),
        (["--late-policy", "never"], "--late-policy"),
        (["--detector-size", "100"], "detector_size"),
        (["--log-level", "LOUD"], "log_level"),
        (["--config", "/nonexistent/gw.toml"], "gw.toml"),
        (["--token-file", "/nonexistent/token"], "token"),
        (["--engine", "tensorrt"], "GPU"),
        (["--providers", "cuda"], "CUDAExecutionProvider"),
        (["--providers", "tensorrt,cpu"], "TensorrtExecutionProvider"),
        (["--providers", "npu"], "npu"),
        (["--mask-regions", "mouth,nose"], "nose"),
        (["--face-selector", "everyone"], "everyone"),
        (["--face-selector", "reference"], "?faces=reference"),
        (["--mask-padding", "1,2,3"], "padding"),
        (["--mask-blur", "2"], "blur"),
        (["--detector-score", "1.5"], "detector_score"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Includes asking for a GPU backend on this CPU-only machine: refused before listening, no traceback."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("gateway: error: "), captured.err
    assert needle in captured.err and "Traceback" not in captured.err


def test_bad_toml_syntax(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "gw.toml"
    toml.write_text("port = = 1\n")
    assert main(["--config", str(toml)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_monitoring_flags_reach_the_monitor_config(tmp_path: Path) -> None:
    default = _config([]).monitor
    assert default.event_log is not None and default.event_log.name == "events.jsonl"
    assert default.degradation.enabled and default.budget_ms == 150.0
    config = _config(
        [
            "--event-log",
            str(tmp_path / "ev.jsonl"),
            "--event-log-max-mb",
            "2",
            "--no-degradation",
            "--budget-ms",
            "120",
            "--workers",
            "2",
            "--sample-interval-s",
            "0.5",
        ]
    )
    m = config.monitor
    assert m.event_log == tmp_path / "ev.jsonl" and m.event_log_max_bytes == 2_000_000
    assert not m.degradation.enabled and m.budget_ms == 120.0 and m.parallelism == 2.0
    assert m.sample_interval_s == 0.5
    assert _config(["--event-log", "none"]).monitor.event_log is None


def test_engine_flags_reach_the_pipeline_config(tmp_path: Path) -> None:
    config = _config(
        [
            "--device-id",
            "1",
            "--fp16",
            "--trt-cache-dir",
            str(tmp_path),
            "--intra-op-threads",
            "2",
            "--contexts",
            "3",
        ]
    )
    p = config.pipeline.engine
    assert (p.device_id, p.fp16, p.trt_cache_dir, p.intra_op_threads, p.contexts) == (1, True, tmp_path, 2, 3)


def test_batch_wait_flag_reaches_the_scheduler_config() -> None:
    assert _config([]).scheduler.batch_wait == "cost"
    assert _config(["--batch-wait", "window"]).scheduler.batch_wait == "window"
    assert _config([], {"batch-wait": "window"}).scheduler.batch_wait == "window"
    with pytest.raises(UsageError, match="batch-wait"):
        build_parser().parse_args(["--batch-wait", "sometimes"])


def test_default_parallelism() -> None:
    assert default_parallelism("onnxruntime", ("cpu",), 2) == (2, 1)  # one single-threaded batch per core
    assert default_parallelism("onnxruntime", ("cpu",), 64) == (8, 1)
    # GPU engines: the workers also run the CPU stages around the engines, so one per core (two at least)
    assert default_parallelism("onnxruntime", ("cuda", "cpu"), 16) == (16, 1)
    assert default_parallelism("tensorrt", ("cpu",), 16) == (16, 1)
    assert default_parallelism("torch", ("cuda",), 64) == (16, 1)
    assert default_parallelism("tensorrt", ("cpu",), 1) == (2, 1)
    # an explicit single worker gets ORT's own threading (all cores)
    one = _config(["--workers", "1"])
    assert one.scheduler.workers == 1 and one.pipeline.engine.intra_op_threads == 0
    both = _config(["--workers", "3", "--intra-op-threads", "2"])
    assert both.scheduler.workers == 3 and both.pipeline.engine.intra_op_threads == 2


def test_repeat_gap_flag_and_its_bounds() -> None:
    assert _config(["--repeat-gap-ms", "0"], {}).sessions.repeat_gap_ms == 0.0
    assert _config([], {}).sessions.repeat_gap_ms == 200.0
    with pytest.raises(ValueError, match="repeat_gap_ms"):
        SessionConfig(repeat_gap_ms=-1)


def test_video_bitrate_flag_file_key_and_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    assert _config([]).sessions.bitrate is None  # by the picture's size
    assert _config(["--video-bitrate", "800"]).sessions.bitrate == 800_000
    assert _config(["--video-bitrate", "auto"], {"video_bitrate": 300}).sessions.bitrate is None
    assert _config([], {"video-bitrate": 1500}).sessions.bitrate == 1_500_000
    for bad in ("fast", "10", "99999"):
        assert main(["--video-bitrate", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--video-bitrate" in err and "Traceback" not in err
    with pytest.raises(ValueError, match="bitrate"):
        SessionConfig(bitrate=10_000)


def test_a_repeat_waits_for_the_gap_a_processed_frame_never_does() -> None:
    assert repeat_due(Outcome.PROCESSED, 0.0, 0.2)
    assert repeat_due(Outcome.DROPPED_DEADLINE, None, 0.2)  # nothing sent yet
    assert not repeat_due(Outcome.DROPPED_DEADLINE, 0.067, 0.2)  # the viewer holds the last picture anyway
    assert repeat_due(Outcome.DROPPED_DEADLINE, 0.2, 0.2)  # a stall: keep frames coming
    assert repeat_due(Outcome.ERROR, 0.01, 0.0)  # 0 = repeat every frame not processed


def test_front_cpus_take_lists_and_ranges_of_cpus_this_gateway_may_use(
    capsys: pytest.CaptureFixture[str],
) -> None:
    usable = sorted(os.sched_getaffinity(0))
    first, last = usable[0], usable[-1]
    assert _config([]).front_cpus == ()  # default: wherever the media process may run
    assert _config([f"--front-cpus={last}"]).front_cpus == (last,)
    assert _config([f"--front-cpus={last},{first}"]).front_cpus == tuple(sorted({first, last}))
    assert _config([], {"front_cpus": [first]}).front_cpus == (first,)  # a TOML list
    if usable == list(range(first, last + 1)):
        assert _config([f"--front-cpus={first}-{last}"]).front_cpus == tuple(usable)
    outside = last + 1
    cases = (
        ([f"--front-cpus={outside}"], f"CPU [{outside}] is not one"),
        (["--front-cpus=two"], "takes CPU numbers"),
        (["--front-cpus=1-x"], "takes CPU numbers"),
        ([f"--front-cpus={first}", "--no-front-process"], "with --no-front-process there is none"),
    )
    for argv, says in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("gateway: error: --front-cpus") and says in err and "\n" not in err
