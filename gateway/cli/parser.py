"""What the declarations become: the argparse parser, the LIVEFUSE_* variables and the example TOML file.

Each is made by one function from `OPTIONS`, so a new option is one declaration and nothing else.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Mapping
from typing import Any, NoReturn

from gateway.cli.declarations import GROUPS, OPTIONS
from gateway.cli.option import ENV_PREFIX, SCALARS, Option, UsageError, default_raw, product_defaults, shown
from gateway.cli.option import toml_value as literal
from gateway.service_links import injected_by_kubernetes

# LIVEFUSE_* variables that belong to other tools (the load generator's media cache), not to a gateway flag
OTHER_ENV = frozenset({"LIVEFUSE_MEDIA_DIR"})
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")
EXAMPLE_HEADER = """\
# livefuse gateway configuration: `gateway --config gateway.toml`.
#
# Every key is also a flag (`max_sessions` = `--max-sessions`) and an environment variable
# (LIVEFUSE_MAX_SESSIONS; switches take true/false; repeatable keys space-separated).
# Precedence: built-in defaults < this file < LIVEFUSE_* < flags.
# The values below are the defaults; a commented key has no fixed default (it is off, or chosen at start-up).
# Made from the option declarations (gateway/cli/decl_*.py): python -m gateway.cli.example
"""


def version_line() -> str:
    from gateway.webrtc.version_check import installed_version as v

    return f"gateway (livefuse) {v('livefuse')}; aiortc {v('aiortc')}, av {v('av')}"


class _Version(argparse.Action):
    """--version, its line made when asked for (not each time a parser is built, as by the health check)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=kwargs.get("help"))

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        print(version_line())
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting: main() owns output and exit codes."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see gateway --help)")


def build_parser(show_defaults: bool = True) -> argparse.ArgumentParser:
    """Every option as a flag, in its group, its help ending with its default. No flag has an argparse
    default: a value is there only when given, so the file and the environment show through the rest.
    `show_defaults=False` leaves the defaults out of the help, and so does not load the configuration's
    modules: for the health check, which never prints the help."""
    p = _Parser(
        prog="gateway",
        description="livefuse real-time face-swap gateway (WHIP/WHEP).",
        epilog="Every flag is also a key of the --config TOML file (deploy/gateway.example.toml lists them "
        "all) and an environment variable LIVEFUSE_<KEY> (LIVEFUSE_MAX_SESSIONS=8; true/false for switches). "
        "Precedence: defaults < file < environment < flags.",
    )
    p.add_argument(
        "--version", action=_Version, help="show the gateway's, aiortc's and av's versions and exit"
    )
    defaults = product_defaults() if show_defaults else None
    groups: dict[str, Any] = {"": p}
    for option in OPTIONS:
        if option.group not in groups:
            groups[option.group] = p.add_argument_group(option.group, GROUPS[option.group])
        text = option.help if defaults is None else f"{option.help} (default: {shown(option, defaults)})"
        text = text.replace("%", "%%")
        kwargs: dict[str, Any] = {"help": text, "dest": option.key}
        if option.kind == "switch":
            kwargs.update(action="store_true", default=None)
        elif option.kind == "list":
            kwargs["action"] = "append"
        elif option.kind in ("int", "float", "path"):
            kwargs["type"] = SCALARS[option.kind]
        if option.choices:
            kwargs["choices"] = list(option.choices)
        if option.metavar:
            kwargs["metavar"] = option.metavar
        groups[option.group].add_argument(option.flag, **kwargs)
    return p


def env_values(environ: Mapping[str, str]) -> dict[str, Any]:
    """LIVEFUSE_<KEY> variables as flag values: LIVEFUSE_MAX_SESSIONS=8, LIVEFUSE_NO_AUDIO=true,
    LIVEFUSE_STUN="stun:a:3478 stun:b:3478" (repeatable flags: space-separated). An unknown LIVEFUSE_*
    name is an error (a typo would otherwise be ignored), except the names a Kubernetes kubelet injects for
    Services (LIVEFUSE_GATEWAY_SERVICE_HOST, ...; gateway.service_links), which are skipped."""
    by_env = {option.env: option for option in OPTIONS}
    values: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name in OTHER_ENV:
            continue
        option = by_env.get(name)
        if injected_by_kubernetes(name, raw, known_setting=option is not None):
            continue
        if option is None:
            raise UsageError(f"unknown environment variable {name} (see gateway --help)")
        try:
            values[option.key] = _env_value(option, raw)
        except ValueError as exc:
            raise UsageError(f"{name}: {str(exc) or 'bad value'}") from None
    return values


def _env_value(option: Option, raw: str) -> Any:
    if option.kind == "switch":
        if raw.strip().lower() not in _TRUE + _FALSE:
            raise ValueError(f"true or false, got {raw!r}")
        return raw.strip().lower() in _TRUE
    if option.kind == "list":
        return raw.split()
    value = SCALARS.get(option.kind, str)(raw)
    if option.choices and value not in option.choices:
        raise ValueError(f"one of {', '.join(option.choices)}, got {raw!r}")
    return value


def file_keys() -> frozenset[str]:
    """The keys a --config file may hold (dashes or underscores)."""
    return frozenset(option.key for option in OPTIONS if option.in_file)


def example_toml() -> str:
    """deploy/gateway.example.toml: every key in its group with its help, at its default; a key without a
    fixed default commented out, at a sample value."""
    defaults = product_defaults()
    lines = [EXAMPLE_HEADER.rstrip("\n")]
    group = ""
    for option in (o for o in OPTIONS if o.in_file):
        if option.group != group:
            group = option.group
            lines += ["", f"# {'-' * 64} {group}", f"# {GROUPS[group]}"]
        help_text = option.help + (f" (default: {option.unset})" if option.unset else "")
        if option.unit:
            help_text += f" [{option.unit}]"
        lines.append("")
        lines += textwrap.wrap(help_text, 108, initial_indent="# ", subsequent_indent="# ")
        value = default_raw(option, defaults)
        if value is None:
            lines.append(f"# {option.key} = {literal(option.example)}")
        else:
            lines.append(f"{option.key} = {literal(value)}")
    return "\n".join(lines) + "\n"
