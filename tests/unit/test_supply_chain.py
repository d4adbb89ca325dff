"""What the images are made of is stated and held still: LICENSE, a NOTICE naming the GPL codecs and the model
licences, constraints.txt pinning every runtime requirement within pyproject's ranges, both Dockerfiles
installing under it, and their base images referenced by digest."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from engines.models.registry import registry

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = ("Dockerfile", "Dockerfile.cpu")


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.+!-]+)", line.strip())
        assert match, f"not an exact pin: {line!r}"
        pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def test_the_licence_is_mit_as_pyproject_says() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "MIT"


def test_the_notice_names_the_gpl_codecs_and_every_models_licence() -> None:
    notice = (ROOT / "NOTICE").read_text()
    for codec in ("x264", "x265", "FFmpeg", "libvpx", "Opus"):
        assert codec in notice, codec
    assert re.search(r"x264 \(libx264\)\s+GNU GPL v2 or later", notice)
    assert "corresponding source code" in notice
    for spec in registry():  # each model by its id, with the licence the registry states
        lines = notice.splitlines()
        at = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{spec.id}:"))
        entry = lines[at] + ("" if lines[at + 1].strip().endswith(":") else lines[at + 1])
        assert spec.licence.split(" (")[0] in entry, (spec.id, spec.licence, entry)


def test_every_runtime_requirement_is_pinned_within_its_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins()
    requirements = [Requirement(r) for r in project["dependencies"]]
    for extra in ("provision", "triton", "gpu"):
        requirements += [Requirement(r) for r in project["optional-dependencies"][extra]]
    by_dockerfile_arg = {"tensorrt-cu13", "onnxruntime-gpu", "cuda-python"}
    for req in requirements:
        name = canonicalize_name(req.name)
        if name in by_dockerfile_arg:
            continue
        assert name in pins, f"{name} is not pinned in constraints.txt (scripts/write_constraints.py)"
        assert req.specifier.contains(pins[name], prereleases=True), (name, str(req.specifier), pins[name])
    assert pins["aiortc"] == "1.16.0" and pins["av"] == "18.1.0"  # the versions the WebRTC patches check
    for tool in ("pip", "setuptools", "wheel"):
        assert tool in pins


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_images_install_under_the_constraints_from_bases_pinned_by_digest(dockerfile: str) -> None:
    text = (ROOT / dockerfile).read_text()
    build = text.split("# ---- runtime")[0]
    assert re.search(r"^COPY .*\bconstraints\.txt\b", build, re.M)
    installs = re.findall(r"^[^#\n]*\bpip install\b.*$", build, re.M)
    assert len(installs) >= 3
    alone = r'--no-deps "[\w-]+==\$\{\w+\}"'  # one package pinned by an ARG, taken without dependencies
    for line in installs:
        assert "PIP_CONSTRAINT=/src/constraints.txt " in line or re.search(alone, line), line
    assert "pip>=" not in text  # pip itself comes from the constraints
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    assert len(froms) == 2
    for ref in froms:
        assert re.fullmatch(r"\$\{(\w+)\}@\$\{(\w+_DIGEST)\}", ref), ref
    digest_args = re.findall(r"^ARG (\w+_DIGEST)=(\S+)$", text, re.M)
    assert len(digest_args) == 1
    name, default = digest_args[0]
    # no digest is made up here: the placeholder says what to set, and the header says how to find it
    assert default.startswith("sha256:OPERATOR-MUST-SET-THE-DIGEST-OF-")
    assert f"--build-arg {name}=sha256:" in text and "imagetools inspect" in text
    assert "/usr/share/doc/livefuse/" in text.split("# ---- runtime")[1]  # LICENSE and NOTICE ship along
