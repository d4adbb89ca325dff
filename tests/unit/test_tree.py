"""The unit tests mirror the packages: tests/unit/<package>/.../test_<module>.py tests
<package>/.../<module>.py (test_<module>_<aspect>.py: one aspect of it). Every product module with logic has
its test module, or a line in COVERED_ELSEWHERE naming the test that covers it; a new module without either
fails here, and so does a line that no longer holds."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "tests" / "unit"
PACKAGES = ("bench", "engines", "gateway", "loadgen", "scripts")

# Unit tests that mirror no product module, and why.
NOT_MIRRORED = {
    "test_tree.py": "this file: the test tree itself",
    "test_package_layout.py": "the import graph of all packages",
    "test_supply_chain.py": "LICENSE, NOTICE, constraints.txt and the images' contents",
    "test_makefile_python.py": "the Makefile's choice of Python",
}
# Directories of tests/unit that mirror something other than a product package.
OTHER_TREES = {
    "deploy": "deploy/: the manifests, alert rules and components (YAML, not Python)",
    "harness": "tests/harness/: the shared helpers' own tests",
}

# Product modules with logic and no test module at their mirrored path: (the test, how). "imports it": that
# test imports the module; "via X": only X imports it, and the test is X's (from the import graph, not from
# line coverage); otherwise how the test reaches it. An empty test: "no test", and why.
COVERED_ELSEWHERE: dict[str, tuple[str, str]] = {
    "bench/audio.py": ("", "no test: a study run by hand (python -m bench.audio)"),
    "bench/benchmark.py": ("tests/integration/test_benchmark.py", "imports it"),
    "bench/crop_jitter.py": ("", "no test: a study run by hand (python -m bench.crop_jitter)"),
    "bench/drift.py": ("", "no test: a study run by hand (python -m bench.drift)"),
    "bench/egress.py": ("", "no test: a study run by hand (python -m bench.egress)"),
    "bench/encoder_settings.py": ("", "no test: a study run by hand (python -m bench.encoder_settings)"),
    "bench/fuzz.py": ("tests/integration/test_dtls_interop.py", "imports it"),
    "bench/fuzz_cases.py": ("tests/unit/gateway/test_image_decode.py", "imports it"),
    "bench/fuzz_gateway.py": ("tests/integration/test_fuzz_suite.py", "runs python -m bench.fuzz_gateway"),
    "bench/fuzz_report.py": ("tests/integration/test_fuzz_suite.py", "via bench/fuzz_gateway.py"),
    "bench/fuzz_rig.py": ("tests/integration/test_fuzz_suite.py", "via bench/fuzz_gateway.py"),
    "bench/interop.py": (
        "tests/integration/test_interop_matrix.py",
        "runs python -m bench.interop --preset suite",
    ),
    "bench/interop_browser.py": ("tests/integration/test_interop_matrix.py", "via bench/interop.py"),
    "bench/interop_cases.py": ("tests/integration/test_interop_matrix.py", "imports it"),
    "bench/interop_clients.py": ("tests/integration/test_interop_matrix.py", "via bench/interop.py"),
    "bench/machine_probe.py": ("", "no test: a study run by hand (python -m bench.machine_probe)"),
    "bench/mark.py": ("", "no test: a study run by hand (python -m bench.mark)"),
    "bench/mark_attacks.py": ("", "no test: a study run by hand (python -m bench.mark_attacks)"),
    "bench/mark_libraries.py": ("", "no test: a study run by hand (python -m bench.mark_libraries)"),
    "bench/pipeline.py": ("", "no test: a study run by hand (python -m bench.pipeline)"),
    "bench/profile_split.py": ("", "no test: a study run by hand (python -m bench.profile_split)"),
    "bench/request_latency.py": ("", "no test: a study run by hand (python -m bench.request_latency)"),
    "bench/roundtrip.py": ("", "no test: a study run by hand (python -m bench.roundtrip)"),
    "bench/scheduler.py": ("", "no test: a study run by hand (python -m bench.scheduler)"),
    "bench/stages.py": ("", "no test: a study run by hand (python -m bench.stages)"),
    "bench/stock_server.py": ("tests/integration/test_bench_vs_stock_live.py", "runs the stock server"),
    "bench/tensor_ops.py": ("", "no test: a study run by hand (python -m bench.tensor_ops)"),
    "bench/tracking.py": ("tests/integration/test_bench_tracking.py", "imports it"),
    "bench/triton_tier.py": ("", "no test: a study run by hand (python -m bench.triton_tier)"),
    "engines/backends/graph_keys.py": (
        "tests/unit/engines/backends/test_onnxruntime_engine.py",
        "via engines/backends/onnxruntime_engine.py",
    ),
    "engines/backends/triton_engine.py": ("tests/unit/engines/triton/test_repository.py", "imports it"),
    "engines/factory.py": ("tests/unit/engines/processors/test_face_detector.py", "imports it"),
    "engines/frames.py": ("tests/unit/engines/test_pipeline.py", "imports it"),
    "engines/image_stages.py": ("tests/unit/engines/processors/test_device_enhancer.py", "imports it"),
    "engines/marking/detect.py": ("tests/unit/engines/marking/test_embed.py", "imports it"),
    "engines/marking/pattern.py": ("tests/unit/engines/marking/test_embed.py", "imports it"),
    "engines/marking/samples.py": (
        "tests/unit/engines/marking/test_embed.py",
        "via engines/marking/detect.py",
    ),
    "engines/models/registry.py": ("tests/unit/engines/models/test_store.py", "imports it"),
    "engines/onnx/model_cache.py": ("tests/unit/engines/onnx/test_prelu.py", "imports it"),
    "engines/onnx/specialise.py": ("tests/unit/engines/backends/test_torch_engine.py", "imports it"),
    "engines/pipeline_config.py": ("tests/unit/gateway/cli/test_build_face_shape.py", "imports it"),
    "engines/processors/arcface.py": (
        "tests/unit/engines/processors/test_alignment_neural_parity.py",
        "imports it",
    ),
    "engines/processors/device_frames.py": (
        "tests/unit/engines/processors/test_device_enhancer.py",
        "imports it",
    ),
    "engines/processors/selection.py": ("tests/unit/engines/test_pipeline.py", "via engines/pipeline.py"),
    "engines/processors/tensor_shading.py": ("tests/unit/engines/processors/test_shading.py", "imports it"),
    "engines/source/expression.py": ("tests/unit/engines/processors/test_face_expression.py", "imports it"),
    "engines/source/mesh.py": ("tests/unit/engines/processors/test_mesh_warp.py", "imports it"),
    "engines/source/shape.py": ("tests/unit/engines/processors/test_face_expression.py", "imports it"),
    "engines/source/validity.py": ("tests/unit/engines/processors/test_face_shape.py", "imports it"),
    "engines/stage_timing.py": (
        "tests/unit/engines/processors/test_device_enhancer.py",
        "via engines/image_stages.py",
    ),
    "engines/triton/python_model.py": (
        "tests/integration/test_triton_engine.py",
        "copied into the model repository, run inside Triton",
    ),
    "engines/triton/server.py": ("tests/unit/engines/triton/test_repository.py", "imports it"),
    "gateway/app_resources.py": ("tests/unit/gateway/cli/test_build.py", "imports it"),
    "gateway/auth.py": ("tests/unit/gateway/front/test_app.py", "imports it"),
    "gateway/background.py": ("tests/unit/gateway/test_app_wiring.py", "imports it"),
    "gateway/cli/command.py": ("tests/unit/gateway/cli/test_build_face_shape.py", "imports it"),
    "gateway/cli/example.py": (
        "tests/unit/gateway/cli/test_values.py",
        "example_toml against deploy/gateway.example.toml",
    ),
    "gateway/cli/layering.py": ("tests/unit/gateway/cli/test_build_face_shape.py", "imports it"),
    "gateway/cli/option.py": ("tests/unit/gateway/cli/test_build_face_shape.py", "imports it"),
    "gateway/cli/parser.py": ("tests/unit/gateway/cli/test_build_face_shape.py", "imports it"),
    "gateway/config.py": ("tests/unit/gateway/test_healthcheck.py", "imports it"),
    "gateway/control/governor.py": (
        "tests/unit/gateway/monitoring/test_monitor.py",
        "mon.governor: levels and frame options",
    ),
    "gateway/egress/addresses.py": ("tests/unit/gateway/egress/test_destinations.py", "imports it"),
    "gateway/egress/config.py": ("tests/unit/gateway/egress/test_whip_client.py", "imports it"),
    "gateway/egress/guarded_resolver.py": ("tests/integration/test_egress_allow_list.py", "imports it"),
    "gateway/engine_watch.py": ("tests/unit/engines/triton/test_repository.py", "imports it"),
    "gateway/errors.py": ("tests/unit/gateway/http/test_control.py", "imports it"),
    "gateway/front/checks.py": ("tests/unit/gateway/front/test_app.py", "via gateway/front/app.py"),
    "gateway/front/child.py": (
        "tests/integration/test_front_process.py",
        "the front process, python -m gateway.front",
    ),
    "gateway/front/config.py": ("tests/unit/gateway/front/test_app.py", "imports it"),
    "gateway/front/supervisor.py": ("tests/unit/gateway/test_app_wiring.py", "via gateway/listening.py"),
    "gateway/front/upstream.py": ("tests/unit/gateway/front/test_app.py", "via gateway/front/app.py"),
    "gateway/http/access_log.py": ("tests/integration/test_tenants.py", "imports it"),
    "gateway/http/body.py": (
        "tests/integration/test_source_limits.py",
        "size cap (413), also test_bad_input",
    ),
    "gateway/http/egress.py": (
        "tests/integration/test_egress.py",
        "?egress= and /sessions/{id}/egress on a live gateway",
    ),
    "gateway/http/exposure.py": ("tests/integration/test_auth.py", "/api/stats by token"),
    "gateway/http/health.py": (
        "tests/integration/test_front_process.py",
        "readiness and liveness, also test_shutdown",
    ),
    "gateway/http/keys.py": ("tests/integration/test_rate_limit.py", "imports it"),
    "gateway/http/monitoring_routes.py": (
        "tests/integration/test_dashboard.py",
        "the monitoring routes, also test_metrics_exposure",
    ),
    "gateway/http/replies.py": ("tests/integration/test_bad_input.py", "every refusal's status and line"),
    "gateway/http/request_checks.py": ("tests/integration/test_bad_input.py", "bodies refused before work"),
    "gateway/http/sessions.py": ("tests/integration/test_auth.py", "GET /sessions, also test_bad_input"),
    "gateway/http/sources.py": ("tests/integration/test_sources.py", "the /sources routes on a live gateway"),
    "gateway/http/tls.py": ("tests/unit/gateway/cli/test_values.py", "imports it"),
    "gateway/http/urls.py": ("tests/integration/test_public_url.py", "relative and --public-url locations"),
    "gateway/http/whep.py": ("tests/integration/test_whep.py", "WHEP on a live gateway"),
    "gateway/http/whip.py": ("tests/integration/test_whip.py", "WHIP on a live gateway"),
    "gateway/image_header.py": ("tests/integration/test_source_limits.py", "imports it"),
    "gateway/listening.py": ("tests/unit/gateway/test_app_wiring.py", "imports it"),
    "gateway/marking/config.py": ("tests/unit/gateway/marking/test_sei.py", "imports it"),
    "gateway/marking/label.py": ("tests/unit/gateway/marking/test_sei.py", "imports it"),
    "gateway/marking/scan.py": ("tests/unit/gateway/marking/test_cli.py", "via gateway/marking/cli.py"),
    "gateway/media/late.py": ("tests/unit/gateway/cli/test_values.py", "imports it"),
    "gateway/media/packet_track.py": ("tests/unit/gateway/media/test_audio.py", "via gateway/media/audio.py"),
    "gateway/media/session_audio.py": ("tests/integration/test_audio.py", "imports it"),
    "gateway/monitoring/audio_section.py": ("tests/unit/gateway/monitoring/test_prometheus.py", "imports it"),
    "gateway/monitoring/container.py": ("tests/unit/gateway/monitoring/test_prometheus.py", "imports it"),
    "gateway/monitoring/front_section.py": ("tests/unit/gateway/monitoring/test_prometheus.py", "imports it"),
    "gateway/monitoring/gpu.py": ("tests/unit/gateway/monitoring/test_sampler.py", "imports it"),
    "gateway/monitoring/null.py": ("tests/unit/gateway/test_app_wiring.py", "imports it"),
    "gateway/monitoring/ports.py": ("tests/unit/gateway/test_app_wiring.py", "imports it"),
    "gateway/monitoring/routes.py": ("tests/unit/gateway/monitoring/test_monitor.py", "imports it"),
    "gateway/monitoring/snapshot.py": ("tests/unit/gateway/monitoring/test_monitor.py", "imports it"),
    "gateway/monitoring/stats.py": (
        "tests/unit/gateway/monitoring/test_monitor.py",
        "via gateway/monitoring/monitor.py",
    ),
    "gateway/process_setup.py": ("tests/integration/test_front_process.py", "both processes start via it"),
    "gateway/secret_file.py": ("tests/unit/gateway/cli/test_build.py", "via gateway/cli/build.py"),
    "gateway/serve.py": ("tests/integration/test_shutdown.py", "the gateway process: serve, drain, stop"),
    "gateway/service_links.py": (
        "tests/unit/gateway/cli/test_build_kubelet_env.py",
        "a kubelet's Service variables at start-up",
    ),
    "gateway/session/answering.py": (
        "tests/integration/test_whip.py",
        "publisher and viewer offers answered or refused",
    ),
    "gateway/session/manager.py": ("tests/unit/gateway/test_app_wiring.py", "imports it"),
    "gateway/session/ports.py": ("tests/unit/gateway/test_app_wiring.py", "imports it"),
    "gateway/session/session.py": ("tests/unit/gateway/test_app_wiring.py", "imports it"),
    "gateway/source_store.py": ("tests/integration/test_source_limits.py", "imports it"),
    "gateway/stun_discovery.py": ("tests/integration/test_stun_discovery.py", "imports it"),
    "gateway/tenants.py": ("tests/integration/test_egress_secrets.py", "imports it"),
    "gateway/webhooks/wiring.py": ("tests/integration/test_webhooks.py", "deliveries from a live gateway"),
    "gateway/webrtc/chain.py": ("tests/unit/gateway/webrtc/test_install.py", "imports it"),
    "gateway/webrtc/codecs/hardware.py": (
        "tests/unit/gateway/webrtc/codecs/test_hw_decode.py",
        "via gateway/webrtc/codecs/hw_decode.py",
    ),
    "gateway/webrtc/codecs/libvpx.py": ("tests/unit/gateway/webrtc/codecs/test_vp8_encoder.py", "imports it"),
    "gateway/webrtc/codecs/libx264.py": (
        "tests/unit/gateway/webrtc/codecs/test_h264_encoder.py",
        "imports it",
    ),
    "gateway/webrtc/codecs/live_rate.py": (
        "tests/unit/gateway/test_app_wiring.py",
        "via gateway/session/manager.py",
    ),
    "gateway/webrtc/codecs/loader.py": (
        "tests/unit/gateway/webrtc/codecs/test_vp8_encoder.py",
        "via gateway/webrtc/codecs/libvpx.py",
    ),
    "gateway/webrtc/congestion/sender_feedback.py": (
        "tests/unit/gateway/webrtc/congestion/test_queue_delay.py",
        "imports it",
    ),
    "gateway/webrtc/congestion/transport_cc.py": ("tests/unit/gateway/webrtc/test_install.py", "imports it"),
    "gateway/webrtc/congestion/uplink_feedback.py": (
        "tests/unit/gateway/webrtc/congestion/test_uplink_rate.py",
        "imports it",
    ),
    "gateway/webrtc/interop/ice.py": (
        "tests/unit/gateway/webrtc/recovery/test_jitter_buffer.py",
        "imports it",
    ),
    "gateway/webrtc/interop/link.py": (
        "tests/integration/test_impaired_network.py",
        "the impaired link on real peers",
    ),
    "gateway/webrtc/negotiation/answer.py": (
        "tests/integration/test_whip.py",
        "every offer's answer, also test_whep",
    ),
    "gateway/webrtc/negotiation/offer_rules.py": (
        "tests/unit/gateway/webrtc/negotiation/test_sdp.py",
        "via gateway/webrtc/negotiation/sdp.py",
    ),
    "gateway/webrtc/sync/sender_clock.py": ("tests/unit/gateway/webrtc/test_compat.py", "imports it"),
    "gateway/webrtc/sync/taps.py": ("tests/unit/gateway/webrtc/test_install.py", "imports it"),
    "loadgen/arguments.py": ("tests/unit/loadgen/test_cli.py", "via loadgen/options.py"),
    "loadgen/avsync.py": ("tests/integration/test_audio.py", "imports it"),
    "loadgen/charts.py": ("tests/unit/loadgen/test_cli.py", "via loadgen/cli.py"),
    "loadgen/chromium.py": ("tests/integration/test_browser.py", "imports it"),
    "loadgen/client.py": ("tests/integration/test_loadgen.py", "imports it"),
    "loadgen/contact_sheet.py": ("tests/unit/bench/quality/test_identity.py", "imports it"),
    "loadgen/fingerprint.py": ("tests/unit/loadgen/test_cli.py", "via loadgen/cli.py"),
    "loadgen/media.py": ("tests/unit/loadgen/test_publisher_encoder.py", "imports it"),
    "loadgen/merge.py": ("tests/integration/test_loadgen_merge.py", "imports it"),
    "loadgen/options.py": ("tests/unit/loadgen/test_cli.py", "imports it"),
    "loadgen/processes.py": ("tests/integration/test_edge_listeners.py", "imports it"),
    "bench/quality/command.py": ("tests/integration/test_quality_report.py", "imports it"),
    "bench/quality/identity_section.py": ("tests/unit/bench/quality/test_identity.py", "imports it"),
    "bench/quality/measures.py": ("tests/unit/bench/quality/test_identity.py", "via bench/quality/report.py"),
    "bench/quality/report.py": ("tests/unit/bench/quality/test_identity.py", "imports it"),
    "bench/quality/shape_section.py": (
        "tests/unit/bench/quality/test_identity.py",
        "via bench/quality/report.py",
    ),
    "bench/quality/study.py": ("tests/unit/bench/quality/test_identity.py", "via bench/quality/report.py"),
    "loadgen/report.py": ("tests/integration/test_loadgen_merge.py", "imports it"),
    "loadgen/sweep.py": ("tests/unit/loadgen/test_tables_capacity.py", "imports it"),
    "loadgen/synth.py": ("tests/unit/loadgen/test_stamp.py", "imports it"),
    "scripts/build_engines.py": ("tests/unit/deploy/test_k8s_manifests.py", "imports it"),
    "scripts/write_constraints.py": (
        "tests/unit/test_supply_chain.py",
        "checks the constraints.txt it writes, does not run it",
    ),
}


def _has_logic(path: Path) -> bool:
    """A function or method anywhere: not a package marker, a re-export or data (declarations, constants)."""
    if path.name in ("__init__.py", "__main__.py"):
        return False
    tree = ast.parse(path.read_text(), str(path))
    return any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) for node in ast.walk(tree))


def _product_modules() -> list[Path]:
    return sorted(p.relative_to(ROOT) for top in PACKAGES for p in (ROOT / top).rglob("*.py"))


def _mirrored_tests(module: Path) -> list[Path]:
    """test_<module>.py and test_<module>_<aspect>.py, unless <module>_<aspect>.py is a module itself."""
    where = UNIT / module.parent
    found = [where / f"test_{module.stem}.py", *sorted(where.glob(f"test_{module.stem}_*.py"))]
    return [t for t in found if t.exists() and _subject(t.relative_to(UNIT)) == ROOT / module]


def _unit_tests() -> list[Path]:
    return sorted(p.relative_to(UNIT) for p in UNIT.rglob("test_*.py"))


def _subject(test: Path) -> Path | None:
    """The module a test file mirrors: test_a_b_c.py is a_b_c.py, else a_b.py, else a.py, in its directory."""
    words = test.stem.removeprefix("test_").split("_")
    base = ROOT / "tests" / "harness" if test.parts[0] == "harness" else ROOT / test.parent
    for n in range(len(words), 0, -1):
        candidate = base / ("_".join(words[:n]) + ".py")
        if candidate.exists():
            return candidate
    return None


def test_every_unit_test_sits_at_the_path_of_what_it_tests() -> None:
    stray = []
    for test in _unit_tests():
        if len(test.parts) == 1:
            if test.name not in NOT_MIRRORED:
                stray.append(f"{test}: at the top of tests/unit, and not in NOT_MIRRORED")
        elif test.parts[0] == "deploy":
            continue
        elif test.parts[0] not in (*PACKAGES, *OTHER_TREES) or _subject(test) is None:
            stray.append(f"{test}: no module at the mirrored path")
    assert not stray, "tests/unit files that mirror no module:\n" + "\n".join(stray)


def test_every_test_directory_is_a_package() -> None:
    """Two test_<x>.py in different directories import as different modules only inside packages."""
    missing = [
        str(d.relative_to(ROOT))
        for d in [UNIT, *(p for p in UNIT.rglob("*") if p.is_dir() and p.name != "__pycache__")]
        if not (d / "__init__.py").exists()
    ]
    assert not missing, f"directories without __init__.py: {missing}"


def test_every_module_with_logic_has_a_test_module_or_a_line_saying_where_it_is_tested() -> None:
    untested = [
        str(m)
        for m in _product_modules()
        if _has_logic(ROOT / m) and not _mirrored_tests(m) and str(m) not in COVERED_ELSEWHERE
    ]
    assert not untested, (
        "modules with neither tests/unit/<path>/test_<module>.py nor a COVERED_ELSEWHERE line:\n"
        + "\n".join(untested)
    )


def test_the_table_names_modules_and_tests_that_exist() -> None:
    stale = []
    for module, (test, how) in COVERED_ELSEWHERE.items():
        path = ROOT / module
        if not path.exists():
            stale.append(f"{module}: no such module")
        elif not _has_logic(path):
            stale.append(f"{module}: no logic, needs no line")
        elif _mirrored_tests(Path(module)):
            stale.append(f"{module}: has its own test module now, drop the line")
        if test and not (ROOT / test).exists():
            stale.append(f"{module}: {test} does not exist")
        if not test and not how.startswith("no test: "):
            stale.append(f"{module}: no test named, and no 'no test: <why>'")
    assert not stale, "COVERED_ELSEWHERE out of date:\n" + "\n".join(stale)
