"""`kubectl kustomize` for the manifest tests: the rendered objects of a kustomization directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml


def kubectl(components: bool = False) -> str:
    """kubectl's path; a skip where it is missing (a failure in CI, which installs it), or where
    `components` are needed and its kustomize predates them (3.7)."""
    found = shutil.which("kubectl")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("kubectl missing in CI: .ci/run installs the Debian package kubernetes-client")
        pytest.skip("kubectl not installed (Debian package kubernetes-client; .ci/run installs it in CI)")
    if components:
        version = subprocess.run([found, "version", "--client", "-o", "json"], capture_output=True, text=True)
        kustomize = json.loads(version.stdout or "{}").get("kustomizeVersion", "v0")
        if tuple(int(n) for n in re.findall(r"\d+", kustomize)[:2]) < (3, 7):
            pytest.skip(f"kubectl's kustomize {kustomize} predates Components (3.7)")
    return found


def render(path: Path, components: bool = False) -> list[dict[str, Any]]:
    result = subprocess.run([kubectl(components), "kustomize", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]
