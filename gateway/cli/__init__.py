"""The gateway's edge: flags, a TOML file and LIVEFUSE_* variables -> GatewayConfig -> run the app.

Precedence: built-in defaults < --config FILE.toml < LIVEFUSE_<KEY> environment variables < flags. Each
option is declared once (declarations: key, group, help, unit, the config fields it sets); the parser, the
variables, the file's keys and the example file are made from the declarations (parser), merged in one place
(layering), onto GatewayConfig with the few conversions that need more than one value (build); `main` is the
console script (command). Only this package reads files or the environment, or decides exit codes.
"""

from gateway.cli.command import main
from gateway.cli.layering import StartupSteps, build_config, layered_values, load_config, merged_values
from gateway.cli.option import UsageError
from gateway.cli.parser import build_parser, env_values, example_toml, version_line

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
