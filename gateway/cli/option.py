"""One option, declared once: its key (the TOML key, the flag `--key-with-dashes`, the variable LIVEFUSE_KEY),
its group and help, its unit, and the GatewayConfig field(s) it sets.

The default is not declared here: it is the field's value in the product's default configuration
(`product_defaults()`), so `GatewayConfig()`, `--help` and the example TOML cannot disagree. Options without a
fixed default (chosen at start-up, or off) say what happens when they are unset (`unset`) and give a sample
value for the example file (`example`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from gateway.config import GatewayConfig

ENV_PREFIX = "LIVEFUSE_"

# text: a string; csv: a comma-separated list (a TOML list too); list: a repeatable flag (space-separated in
# the environment); switch: a flag without a value (true/false in the file and the environment)
Kind = Literal["text", "int", "float", "path", "switch", "list", "csv"]
SCALARS: Mapping[str, Callable[[Any], Any]] = MappingProxyType(
    {"text": str, "int": int, "float": float, "path": Path}
)


class UsageError(ValueError):
    """A bad command line or environment variable; main() prints it as one line and exits 2."""


@dataclass(frozen=True)
class Option:
    key: str
    group: str
    help: str
    kind: Kind = "text"
    # dotted GatewayConfig paths this option sets ("sessions.max_sessions"); () = read by its own conversion
    fields: tuple[str, ...] = ()
    unit: str = ""
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    negate: bool = False  # a `no_*` switch: the field is the switch's opposite
    to_field: Callable[[Any], Any] | None = None  # the value (after `kind`) -> the field's value
    to_raw: Callable[[Any], Any] | None = None  # the field's default -> the value a person writes
    unset: str | None = None  # no fixed default: what happens without the option
    example: Any = None  # a sample value for the example file, where there is no fixed default
    in_file: bool = True  # also a key of the TOML file (not --config itself)

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.key.upper()


def product_defaults() -> GatewayConfig:
    """The product's defaults: `GatewayConfig()` with the monitor's settings spelled out (the CLI always
    builds a MonitorConfig; an app built without one makes the same from the scheduler's budget).
    Imported here, not above: the health check reads the options without loading the media stack."""
    from gateway.config import GatewayConfig
    from gateway.monitoring.monitor import MonitorConfig

    return GatewayConfig(monitor=MonitorConfig())


def field_of(config: Any, path: str) -> Any:
    for name in path.split("."):
        config = getattr(config, name)
    return config


def with_fields(config: Any, changes: Mapping[str, Any]) -> Any:
    """`config` with the dotted fields in `changes` replaced; each nested dataclass is rebuilt once, so its
    checks (`__post_init__`) see all of its new values together."""
    direct: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for path, value in changes.items():
        head, _, rest = path.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            direct[head] = value
    for head, sub in nested.items():
        direct[head] = with_fields(direct.get(head, getattr(config, head)), sub)
    return replace(config, **direct) if direct else config


def split(value: Any) -> tuple[str, ...] | None:
    """A comma-separated string or a TOML list as a tuple of strings; None stays None."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return tuple(v.strip() for v in str(value).split(",") if v.strip())


class Unset:
    """The marker for a value that leaves the field at its default (an empty list, an empty path)."""


UNSET = Unset()


_FILE_TYPES: Mapping[str, tuple[type, ...]] = MappingProxyType(
    {
        "switch": (bool,),
        "int": (int,),
        "float": (int, float),
        "text": (str, int, float),  # a text option may take a number (`video_bitrate = 300` or "auto")
        "path": (str,),
        "list": (list, str),
        "csv": (list, str),
    }
)
_TOML_NAMES = {"switch": "true or false (a TOML boolean)", "int": "an integer", "float": "a number"}


def checked_file_value(option: Option, raw: Any) -> Any:
    """A --config file's value typed as the option's kind, or ValueError (one line): TOML says what type a
    value is, so `allow_anonymous = "false"` is a mistake to report, not a string to coerce (`bool("false")`
    is true). Lists hold strings or numbers only."""
    wanted = _FILE_TYPES[option.kind]
    bad = not isinstance(raw, wanted) or (isinstance(raw, bool) and option.kind != "switch")
    if isinstance(raw, list):
        bad = bad or any(isinstance(v, bool | list | dict) for v in raw)
    if bad:
        kind = _TOML_NAMES.get(option.kind, "a list" if list in wanted else "a string")
        raise ValueError(f"config file: {option.key} must be {kind}, got {toml_value(raw)}")
    return raw


def field_value(option: Option, raw: Any) -> Any:
    """A value from a flag, the environment or the file (not None) as the value of the option's fields;
    UNSET where it leaves them at their defaults."""
    value: Any
    if option.kind == "switch":
        if not isinstance(raw, bool):  # flags and the environment give booleans; a file is checked on load
            raise ValueError(f"{option.flag} is a switch: true or false, got {raw!r}")
        value = raw
        value = not value if option.negate else value
    elif option.kind in ("list", "csv"):
        value = split(raw)
        if not value and option.to_field is None:
            return UNSET
    elif option.kind == "path" and str(raw) == "":
        return UNSET
    else:
        value = SCALARS[option.kind](raw)
    return option.to_field(value) if option.to_field is not None else value


def default_raw(option: Option, defaults: GatewayConfig) -> Any:
    """The option's default as a person writes it (the TOML value); None where there is no fixed one."""
    if option.unset is not None:
        return None
    if not option.fields:  # read by a conversion of its own: only switches have a fixed default, off
        return False if option.kind == "switch" else None
    value = field_of(defaults, option.fields[0])
    if option.to_raw is not None:
        return option.to_raw(value)
    if option.kind == "switch":
        return (not value) if option.negate else bool(value)
    if option.kind == "list":
        return [str(v) for v in value]
    if option.kind == "csv":
        return ",".join(number(v) if isinstance(v, float) else str(v) for v in value)
    return value


def number(value: float) -> str:
    return f"{value:g}"


def shown(option: Option, defaults: GatewayConfig) -> str:
    """The default as --help says it: `150 ms`, `on`, `none`, or what happens when the option is unset."""
    if option.unset is not None:
        return option.unset
    value = default_raw(option, defaults)
    if isinstance(value, bool):
        text = "on" if value else "off"
    elif isinstance(value, list):
        text = " ".join(value) or "none"
    elif isinstance(value, float):
        text = number(value)
    else:
        text = str(value) if value not in (None, "") else "none"
    return f"{text} {option.unit}" if option.unit and text != "none" else text


def toml_value(value: Any) -> str:
    """A TOML literal: strings quoted (JSON's escapes are TOML's), lists of them, numbers and booleans."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))
