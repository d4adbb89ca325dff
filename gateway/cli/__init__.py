"""The gateway's edge: flags, a TOML file and LIVEFUSE_* variables -> GatewayConfig -> run the app.

Precedence: built-in defaults < --config FILE.toml < LIVEFUSE_<KEY> environment variables < flags. Each
option is declared once (declarations: key, group, help, unit, the config fields it sets); the parser, the
variables, the file's keys and the example file are made from the declarations (parser), merged in one place
(layering), onto GatewayConfig with the few conversions that need more than one value (build); `main` is the
console script (command). Only this package reads files or the environment, or decides exit codes.

The names below are loaded on first use: the health check imports `gateway.cli.layering` alone, without the
media stack that building a GatewayConfig needs.
"""

from __future__ import annotations

import importlib
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.cli.build import StartupSteps, build_config, load_config
    from gateway.cli.command import main
    from gateway.cli.layering import layered_values, merged_values
    from gateway.cli.option import UsageError
    from gateway.cli.parser import build_parser, env_values, example_toml, version_line

_HOMES = MappingProxyType(
    {
        "StartupSteps": "build",
        "build_config": "build",
        "load_config": "build",
        "main": "command",
        "layered_values": "layering",
        "merged_values": "layering",
        "UsageError": "option",
        "build_parser": "parser",
        "env_values": "parser",
        "example_toml": "parser",
        "version_line": "parser",
    }
)
__all__ = [
    "StartupSteps",
    "UsageError",
    "build_config",
    "build_parser",
    "env_values",
    "example_toml",
    "layered_values",
    "load_config",
    "main",
    "merged_values",
    "version_line",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
