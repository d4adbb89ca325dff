"""One value per option: built-in defaults < --config FILE.toml < LIVEFUSE_<KEY> variables < flags.

`layered_values` is the one reader of the command line, the environment and the file: the gateway's loader
(`load_config`) and the health check (gateway.healthcheck) both go through it, so they cannot disagree about
a port or a scheme.
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.cli.build import config_from
from gateway.cli.parser import build_parser, env_values, file_keys
from gateway.cli.values import auto_address
from gateway.config import GatewayConfig


def merged_values(
    args: argparse.Namespace,
    file_values: Mapping[str, Any] | None = None,
    env: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One value per key: flags over environment over file. A file key that is no option is an error."""
    merged: dict[str, Any] = {k.replace("-", "_"): v for k, v in (file_values or {}).items()}
    unknown = sorted(set(merged) - file_keys() - {"config"})
    if unknown:
        raise ValueError(f"unknown key(s) in config file: {', '.join(unknown)}")
    merged.pop("config", None)
    merged.update(env or {})
    merged.update({k: v for k, v in vars(args).items() if v is not None})
    return merged


def build_config(
    args: argparse.Namespace,
    file_values: Mapping[str, Any] | None = None,
    env: Mapping[str, Any] | None = None,
) -> GatewayConfig:
    """The parsed flags over environment values (env_values) over TOML values (keys like the flags, dashes or
    underscores), as a GatewayConfig."""
    return config_from(merged_values(args, file_values, env))


def read_file(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def layered_values(argv: Sequence[str] | None, environ: Mapping[str, str]) -> dict[str, Any]:
    """The flags, the LIVEFUSE_* variables and the TOML file they name (--config, else LIVEFUSE_CONFIG),
    merged. Raises UsageError/ValueError/OSError/TOMLDecodeError on a bad flag, variable or file."""
    args = build_parser().parse_args(argv)
    env = env_values(environ)
    config_file = args.config or env.pop("config", None)
    return merged_values(args, read_file(config_file), env)


@dataclass(frozen=True)
class StartupSteps:
    """What main() does once the configuration is good: a certificate to make (--self-signed), the public
    address to ask the first STUN server for (--ice-public-address auto)."""

    self_signed: bool = False
    discover_address: bool = False


def load_config(argv: Sequence[str] | None, environ: Mapping[str, str]) -> tuple[GatewayConfig, StartupSteps]:
    """The configuration loader: flags, the environment (LIVEFUSE_*) and the TOML file they name, merged
    into a GatewayConfig, and the start-up steps they ask for. Raises UsageError/ValueError/OSError on a
    bad setting; checks nothing about the machine."""
    values = layered_values(argv, environ)
    steps = StartupSteps(
        self_signed=bool(values.get("self_signed")),
        discover_address=auto_address(values.get("ice_public_address")),
    )
    return config_from(values), steps
