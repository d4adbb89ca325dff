"""The embedded gateway's command line: what loadgen asks of the gateway it starts."""

from __future__ import annotations

from gateway.cli import build_parser as gateway_parser
from loadgen.cli import build_parser
from loadgen.embedded import EmbeddedGatewayConfig


def test_capacity_runs_measure_full_quality_and_can_open_every_job() -> None:
    argv = EmbeddedGatewayConfig(degradation=False, max_sessions=32).argv(8123)
    args = gateway_parser().parse_args(argv[3:])  # after "python -m gateway.cli"
    assert args.no_degradation and args.max_sessions == 32
    assert args.ice_loopback_only and args.port == 8123
    assert "--no-degradation" not in EmbeddedGatewayConfig().argv(8123)


def test_a_token_that_starts_with_a_dash_reaches_the_gateway() -> None:
    """secrets.token_urlsafe gives a leading "-" one time in 64: passed as two words, argparse took it
    for a flag and the gateway refused to start."""
    argv = EmbeddedGatewayConfig(token="-Xq3_secret").argv(8123)
    assert gateway_parser().parse_args(argv[3:]).token == "-Xq3_secret"


def test_keep_degradation_flag() -> None:
    args = build_parser().parse_args(["capacity", "--keep-degradation"])
    assert args.find_capacity and args.keep_degradation
