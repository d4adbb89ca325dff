"""The start-up self-check refuses an aiortc the patches were not checked against, in one line."""

from __future__ import annotations

import pytest

import gateway.cli
import gateway.cli.command
from gateway.webrtc.version_check import (
    AIORTC_PATCHES,
    AIORTC_PINNED,
    PatchCheck,
    UncheckedVersion,
    check_aiortc,
    installed_version,
    major_minor,
)


def test_the_pinned_and_the_installed_aiortc_pass_every_check() -> None:
    check_aiortc(AIORTC_PINNED, AIORTC_PATCHES)
    check_aiortc(installed_version("aiortc"), AIORTC_PATCHES)


def test_the_pyproject_pin_is_the_version_the_checks_name() -> None:
    from pathlib import Path

    pyproject = (Path(__file__).parents[4] / "pyproject.toml").read_text()
    assert f'"aiortc=={AIORTC_PINNED}"' in pyproject


@pytest.mark.parametrize("version", ["1.17.0", "1.13.2", "2.0.0", "garbage"])
def test_an_unchecked_version_names_the_patch_the_version_and_the_pin(version: str) -> None:
    with pytest.raises(UncheckedVersion) as info:
        check_aiortc(version, AIORTC_PATCHES)
    message = str(info.value)
    assert "\n" not in message
    assert f"aiortc {version}" in message
    assert AIORTC_PATCHES[0].patch in message
    assert f"aiortc=={AIORTC_PINNED}" in message


def test_the_first_patch_that_does_not_cover_the_version_is_named() -> None:
    checks = (PatchCheck("wide", (1, 0), (1, 99)), PatchCheck("narrow one", (1, 16), (1, 16)))
    check_aiortc("1.16.3", checks)
    with pytest.raises(UncheckedVersion, match=r"narrow one patch .* \(1\.16\)"):
        check_aiortc("1.15.0", checks)
    assert major_minor("1.16.0rc1") == (1, 16)


def test_the_gateway_refuses_to_start_on_a_faked_aiortc(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(gateway.cli.command, "installed_version", lambda package: "1.99.0")
    assert gateway.cli.main(["--port", "0", "--event-log", "none"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("gateway: error: aiortc 1.99.0 is not a version the marker release")
