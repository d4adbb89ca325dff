"""The start-up self-check: refuse an aiortc that the gateway's patches were not checked against.

The extensions in gateway.webrtc reach into aiortc's private names (compat). On another aiortc each
would switch itself off with a warning, leaving a gateway that starts but quietly loses marker release,
transport-cc or the audio relay. So the CLI checks first and refuses to start with one line naming the
patch, the version found and the one to install. Pure: the version and the checks are passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata

from gateway.webrtc.compat import CHECKED_AIORTC

AIORTC_PINNED = "1.16.0"  # pyproject pins this one; every check below covers it


class UncheckedVersion(RuntimeError):
    """An installed library is outside what a patch was checked against; the message is one line."""


@dataclass(frozen=True)
class PatchCheck:
    patch: str  # what it does and where it lives, as the message shows it
    lowest: tuple[int, int]  # (major, minor) checked, inclusive
    highest: tuple[int, int]

    def covers(self, version: tuple[int, int]) -> bool:
        return self.lowest <= version <= self.highest

    def checked_on(self) -> str:
        low, high = (f"{m}.{n}" for m, n in (self.lowest, self.highest))
        return low if low == high else f"{low}-{high}"


_LOW, _HIGH = CHECKED_AIORTC
AIORTC_PATCHES: tuple[PatchCheck, ...] = (
    PatchCheck("marker release of received frames (webrtc.recovery.jitter_buffer)", _LOW, _HIGH),
    PatchCheck("loss-capped REMB to publishers (webrtc.congestion.uplink_feedback)", _LOW, _HIGH),
    PatchCheck("transport-cc feedback and pacing (webrtc.congestion.transport_cc)", _LOW, _HIGH),
    PatchCheck("receive taps for the audio relay (webrtc.sync.taps)", _LOW, _HIGH),
    PatchCheck("sender-report clock stamping (webrtc.sync.sender_clock)", _LOW, _HIGH),
    PatchCheck("hardware decode on the receivers' decoder factory (webrtc.codecs.hw_decode)", _LOW, _HIGH),
)


def major_minor(version: str) -> tuple[int, int]:
    """ "1.16.0" -> (1, 16); anything unreadable -> (0, 0), which no check covers."""
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return 0, 0


def check_aiortc(version: str, checks: Sequence[PatchCheck] = AIORTC_PATCHES) -> None:
    """Raise UncheckedVersion for the first patch not checked against aiortc `version`."""
    found = major_minor(version)
    for check in checks:
        if not check.covers(found):
            raise UncheckedVersion(
                f"aiortc {version} is not a version the {check.patch} patch was checked against "
                f"({check.checked_on()}); install aiortc=={AIORTC_PINNED}"
            )


def installed_version(package: str) -> str:
    """The installed distribution's version, or "not installed"."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"
