"""`make` picks the first Python >= 3.11 on PATH and says which."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.mark.slow  # runs make in a subprocess: 3-4 s, the slowest unit test without models
@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_first_new_enough_python_is_used(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake(bin_dir, "python3.13", "exit 127")  # a pyenv shim without that version behind it
    _fake(bin_dir, "python3.12", f'exec "{sys.executable}" "$@"')
    for tool in ("make", "sh", "env"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    venv = tmp_path / "venv"
    env = {**os.environ, "PATH": str(bin_dir)}
    env.pop("PYTHON", None)
    out = subprocess.run(
        ["make", "-C", str(ROOT), f"VENV={venv}", f"{venv}/bin/python"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"using python3.12 ({sys.version.split()[0]})" in out.stdout, out.stdout
    assert (venv / "bin" / "python").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_no_new_enough_python_says_so(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake(bin_dir, "python3", "exit 1")  # e.g. python 3.10
    for tool in ("make", "sh"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    out = subprocess.run(
        ["make", "-C", str(ROOT), f"VENV={tmp_path / 'v'}", f"{tmp_path / 'v'}/bin/python"],
        env={**os.environ, "PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "no Python >= 3.11 found" in out.stdout + out.stderr
