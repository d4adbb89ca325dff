"""The embedded gateway's command line: what loadgen asks of the gateway it starts."""

from __future__ import annotations

from loadgen.cli import build_parser
from loadgen.embedded import EmbeddedGatewayConfig


def test_capacity_runs_measure_full_quality_and_can_open_every_job() -> None:
    argv = EmbeddedGatewayConfig(degradation=False, max_sessions=32).argv(8123)
    assert "--no-degradation" in argv and argv[argv.index("--max-sessions") + 1] == "32"
    assert "--ice-loopback-only" in argv and argv[argv.index("--port") + 1] == "8123"
    assert "--no-degradation" not in EmbeddedGatewayConfig().argv(8123)


def test_keep_degradation_flag() -> None:
    args = build_parser().parse_args(["--find-capacity", "--keep-degradation"])
    assert args.find_capacity and args.keep_degradation
