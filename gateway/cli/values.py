"""The few settings that are not a plain number, string or switch: each turns what a person writes into the
field's value, with a one-line error naming the flag when it cannot. The modules that know a value's meaning
are imported when a value is converted, so that reading the options (the health check) stays light."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from gateway.cli.option import split
from gateway.secret_file import secret_path

if TYPE_CHECKING:
    from gateway.media.late import LatePolicy
    from gateway.tenants import Tenant
    from gateway.webrtc.interop.host_ports import PortRange
    from gateway.webrtc.interop.ice import TurnServer

LATE_POLICIES = (
    "repeat",
    "original",
)  # gateway.media.late.LatePolicy's values (a unit test holds them equal)


# the per-session settings whose defaults are options, read by the sessions' own parser
# (gateway.session.settings) as WHIP and PATCH read them, with its errors naming the flag
_SESSION_FLAGS = MappingProxyType(
    {
        "processors": "--processors",
        "mask": "--mask-regions",
        "faces": "--face-selector",
        "shape": "--face-shape",
    }
)
T = TypeVar("T")


def _session_default(parse: Callable[[Any, Callable[[str], str]], T], value: Any) -> T:
    from gateway.errors import GatewayError

    try:
        return parse(value, _SESSION_FLAGS.__getitem__)
    except GatewayError as exc:
        raise ValueError(str(exc)) from None


def processors(names: tuple[str, ...]) -> tuple[str, ...]:
    """`none` (or an empty list) = no processing: frames pass through the media path untouched."""
    from gateway.session.settings import processor_names

    return _session_default(processor_names, names)


def mask_regions(names: tuple[str, ...]) -> tuple[str, ...]:
    from gateway.session.settings import mask_regions

    return _session_default(mask_regions, names)


def face_selector(name: str) -> str:
    from gateway.session.settings import default_selector

    return _session_default(default_selector, name)


def face_shape(value: float) -> float:
    from gateway.session.settings import face_shape

    return _session_default(face_shape, value)


def processors_raw(names: tuple[str, ...]) -> str:
    return ",".join(names) or "none"


def padding(parts: tuple[str, ...]) -> tuple[float, float, float, float]:
    if len(parts) != 4:
        raise ValueError(f"mask padding needs 4 numbers (top,right,bottom,left), got {','.join(parts)!r}")
    top, right, bottom, left = (float(p) for p in parts)
    return top, right, bottom, left


def bitrate_kbps(value: str) -> int | None:
    """--video-bitrate (kbit/s, or `auto`) as bits per second; None = by the picture's size."""
    if value.strip().lower() == "auto":
        return None
    try:
        kbps = float(value)
    except ValueError:
        raise ValueError(f"--video-bitrate takes kbit/s or 'auto', got {value!r}") from None
    if not 50 <= kbps <= 50_000:
        raise ValueError(f"--video-bitrate must be 50..50000 kbit/s, got {value!r}")
    return int(kbps * 1000)


def bitrate_raw(bits: int | None) -> str | int:
    return "auto" if bits is None else bits // 1000


def cpu_list(parts: tuple[str, ...]) -> tuple[int, ...]:
    """--front-cpus: "3", "2,3" or "2-3" (a TOML list too), each one a CPU this process may run on."""
    allowed = os.sched_getaffinity(0)
    cpus: set[int] = set()
    for part in parts:
        try:
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
        except ValueError:
            raise ValueError(
                f"--front-cpus takes CPU numbers such as 3, 2,3 or 2-3, got {','.join(parts)!r}"
            ) from None
    if cpus - allowed:
        raise ValueError(
            f"--front-cpus: CPU {sorted(cpus - allowed)} is not one this gateway may run on "
            f"({','.join(map(str, sorted(allowed)))})"
        )
    return tuple(sorted(cpus))


def turn_servers(specs: tuple[str, ...]) -> tuple[TurnServer, ...]:
    """--turn url[,username,credential], repeatable."""
    from gateway.webrtc.interop.ice import TurnServer

    servers = []
    for spec in specs:
        url, username, credential = (spec.split(",") + ["", ""])[:3]
        servers.append(TurnServer(url, username, credential))
    return tuple(servers)


def loopback_only(on: bool) -> tuple[str, ...]:
    from gateway.webrtc.interop.ice import LOOPBACK

    return LOOPBACK if on else ()


def late_policy(name: str) -> LatePolicy:
    from gateway.media.late import LatePolicy

    return LatePolicy(name)


def port_range(text: str) -> PortRange | None:
    from gateway.webrtc.interop.host_ports import parse_port_range

    return parse_port_range(text) if text else None


def dscp(text: str) -> int:
    from gateway.webrtc.interop.dscp import parse_dscp

    return parse_dscp(text)


def tenants(path: Path) -> tuple[Tenant, ...]:
    from gateway.tenants import load_tenants

    secret_path(path, "--tenants-file")
    return load_tenants(path)


def text_or_none(value: str) -> str | None:
    """An empty string is no value (a URL, a token)."""
    return value or None


def event_log(value: Path) -> Path | None:
    """`none` keeps events in memory only."""
    return None if str(value).lower() == "none" else value


def megabytes(mb: float) -> int:
    return int(mb * 1_000_000)


def megabytes_raw(size: int) -> float:
    return size / 1_000_000


def auto_address(value: Any) -> bool:
    return value is not None and str(value).strip().lower() == "auto"


def public_address(value: Any, stun: Any) -> str | None:
    """--ice-public-address IP, or `auto` (None here: main() asks the first --stun server at start-up)."""
    if not value:
        return None
    if auto_address(value):
        servers = split(stun) or ()
        if not servers:
            raise ValueError("--ice-public-address auto asks the first --stun server: give one (--stun URL)")
        from gateway.stun_discovery import parse_stun_url

        parse_stun_url(servers[0])  # a bad URL: one line now, not at start-up
        return None
    return str(value)


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
