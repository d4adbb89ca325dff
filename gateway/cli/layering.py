"""One value per option: built-in defaults < --config FILE.toml < LIVEFUSE_<KEY> variables < flags.

`layered_values` is the one reader of the command line, the environment and the file: the gateway's loader
(gateway.cli.build.load_config) and the health check (gateway.healthcheck) both go through it, so they
cannot disagree about a port or a scheme. It imports no media code, so the health check stays light.
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gateway.cli.declarations import OPTIONS
from gateway.cli.option import checked_file_value
from gateway.cli.parser import build_parser, env_values, file_keys


def merged_values(
    args: argparse.Namespace,
    file_values: Mapping[str, Any] | None = None,
    env: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One value per key: flags over environment over file. A file key that is no option, or a value of
    the wrong TOML type (a string where a boolean belongs), is an error."""
    merged: dict[str, Any] = {k.replace("-", "_"): v for k, v in (file_values or {}).items()}
    unknown = sorted(set(merged) - file_keys() - {"config"})
    if unknown:
        raise ValueError(f"unknown key(s) in config file: {', '.join(unknown)}")
    merged.pop("config", None)
    by_key = {option.key: option for option in OPTIONS}
    merged = {key: checked_file_value(by_key[key], value) for key, value in merged.items()}
    merged.update(env or {})
    merged.update({k: v for k, v in vars(args).items() if v is not None})
    return merged


def read_file(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def layered_values(
    argv: Sequence[str] | None, environ: Mapping[str, str], show_defaults: bool = True
) -> dict[str, Any]:
    """The flags, the LIVEFUSE_* variables and the TOML file they name (--config, else LIVEFUSE_CONFIG),
    merged. Raises UsageError/ValueError/OSError/TOMLDecodeError on a bad flag, variable or file.
    `show_defaults`: whether a --help among the flags shows them (build_parser)."""
    args = build_parser(show_defaults).parse_args(argv)
    env = env_values(environ)
    config_file = args.config or env.pop("config", None)
    return merged_values(args, read_file(config_file), env)
