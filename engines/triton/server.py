"""Run the `tritonserver` binary from the PyPI wheel `nvidia-pytriton`, for development and CI.

Why the wheel: it is the one Triton build pip installs, so a laptop and CI run the same server the Kubernetes
deployment runs from NVIDIA's container. It carries only the Python backend, hence the repository builder's
`python` backend. What the wheel leaves undone is done here: the Python backend's library, utils module and
stub are gathered into one backend directory, the bundled libraries go on `LD_LIBRARY_PATH`, and this
interpreter's `bin` goes first on `PATH`, so Triton's Python models import the gateway's packages.

Install: `pip install --no-deps 'nvidia-pytriton==0.7.0'` (its `numpy<2` pin is for pytriton's own Python
layer, which livefuse does not import).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = (
    "Triton from PyPI needs `pip install 'livefuse[triton]' && "
    "pip install --no-deps 'nvidia-pytriton==0.7.0'`"
)


class TritonServerError(RuntimeError):
    """The server cannot be found, assembled or started; str() is one line."""


@dataclass(frozen=True)
class WheelLayout:
    """Where the pieces of Triton live inside an installed `nvidia-pytriton` wheel."""

    binary: Path
    backend_lib: Path
    backend_utils: Path
    stub: Path
    libs: Path


@dataclass(frozen=True)
class TritonServerConfig:
    model_repository: Path
    grpc_port: int = 8001
    http_port: int = 8000
    metrics_port: int = 8002
    host: str = "127.0.0.1"
    work_dir: Path | None = None  # where the backend directory is assembled (default: a temp dir)
    log_verbose: int = 0
    strict_readiness: bool = True  # /v2/health/ready only when every model is ready
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for port in (self.grpc_port, self.http_port, self.metrics_port):
            if not 0 < port < 65536:
                raise ValueError(f"port must be 1..65535, got {port}")


def python_tag(version: tuple[int, int] | None = None) -> str:
    major, minor = version or sys.version_info[:2]
    return f"{major}.{minor}"


def locate_wheel(version: tuple[int, int] | None = None) -> WheelLayout:
    """Find the binary, Python backend and stub for this interpreter (TritonServerError + hint if not)."""
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise TritonServerError(f"tritonserver not found: {INSTALL_HINT}")
    root = Path(list(spec.submodule_search_locations)[0])
    server = root / "tritonserver"
    layout = WheelLayout(
        binary=server / "bin" / "tritonserver",
        backend_lib=server / "backends" / "python" / "libtriton_python.so",
        backend_utils=server / "backends" / "python" / "triton_python_backend_utils.py",
        stub=server / "python_backend_stubs" / python_tag(version) / "triton_python_backend_stub",
        libs=root.parent / "nvidia_pytriton.libs",
    )
    missing = [
        str(p)
        for p in (layout.binary, layout.backend_lib, layout.backend_utils, layout.stub)
        if not p.exists()
    ]
    if missing:
        raise TritonServerError(f"incomplete nvidia-pytriton install (missing {missing[0]}): {INSTALL_HINT}")
    return layout


def assemble_backends(layout: WheelLayout, backend_root: Path) -> Path:
    """Copy the Python backend's three files into `<backend_root>/python/` (idempotent)."""
    target = backend_root / "python"
    target.mkdir(parents=True, exist_ok=True)
    for src in (layout.backend_lib, layout.backend_utils, layout.stub):
        dst = target / src.name
        if not dst.exists() or dst.stat().st_size != src.stat().st_size:
            shutil.copy2(src, dst)
    return backend_root


def server_env(layout: WheelLayout, base: Mapping[str, str], python_bin: Path) -> dict[str, str]:
    """Environment for the server: bundled libs on LD_LIBRARY_PATH, this interpreter's bin first on PATH."""
    env = dict(base)
    libs = (str(layout.libs), base.get("LD_LIBRARY_PATH", ""))
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in libs if p)
    env["PATH"] = os.pathsep.join(p for p in (str(python_bin), base.get("PATH", "")) if p)
    return env


def server_command(layout: WheelLayout, config: TritonServerConfig, backend_root: Path) -> list[str]:
    return [
        str(layout.binary),
        f"--model-repository={config.model_repository}",
        f"--backend-directory={backend_root}",
        f"--grpc-port={config.grpc_port}",
        f"--http-port={config.http_port}",
        f"--metrics-port={config.metrics_port}",
        f"--grpc-address={config.host}",
        f"--http-address={config.host}",
        f"--metrics-address={config.host}",
        f"--strict-readiness={'true' if config.strict_readiness else 'false'}",
        "--allow-gpu-metrics=false",
        "--exit-on-error=true",
        f"--log-verbose={config.log_verbose}",
        *config.extra_args,
    ]


def http_ready(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Triton's own readiness (`/v2/health/ready`): the server is up and, strictly, every model is ready."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/v2/health/ready", timeout=timeout_s) as r:
            return bool(r.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def port_in_use(host: str, port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def stub_shm_regions(pgid: int) -> list[str]:
    """Shared-memory region names used by the Python-backend stubs in process group `pgid`."""
    import psutil

    names: list[str] = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if os.getpgid(proc.pid) != pgid:
                continue
        except OSError:
            continue
        for arg in proc.info.get("cmdline") or []:
            if arg.startswith("triton_python_backend_shm_region_") and "/" not in arg:
                names.append(arg)
    return names


class TritonProcess:
    """One `tritonserver` child process: start, wait until ready, stop (SIGTERM, then SIGKILL; idempotent)."""

    def __init__(self, config: TritonServerConfig, log_path: Path | None = None) -> None:
        self.config = config
        self.layout = locate_wheel()
        if not config.model_repository.is_dir():
            raise TritonServerError(
                f"model repository not found: {config.model_repository} "
                f"(build it with scripts/build_engines.py --triton-repository DIR)"
            )
        self._log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmp: Path | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def command(self) -> list[str]:
        return server_command(self.layout, self.config, self._backend_root())

    def _backend_root(self) -> Path:
        if self.config.work_dir is not None:
            return self.config.work_dir / "backends"
        if self._tmp is None:
            import tempfile

            self._tmp = Path(tempfile.mkdtemp(prefix="livefuse-triton-"))
        return self._tmp / "backends"

    def start(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        busy = [
            p
            for p in (self.config.grpc_port, self.config.http_port, self.config.metrics_port)
            if port_in_use(self.config.host, p)
        ]
        if busy:  # another server there would answer our readiness checks: refuse, in one line
            raise TritonServerError(f"port {busy[0]} on {self.config.host} is already in use")
        backend_root = assemble_backends(self.layout, self._backend_root())
        env = server_env(self.layout, os.environ, Path(sys.executable).parent)
        out = open(self._log_path, "ab") if self._log_path is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                server_command(self.layout, self.config, backend_root),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            if self._log_path is not None and not isinstance(out, int):
                out.close()

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Block until `/v2/health/ready`; TritonServerError when the process exits or time runs out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = None if self._proc is None else self._proc.returncode
                raise TritonServerError(
                    f"tritonserver exited (code {code}) before it was ready"
                    + (f"; see {self._log_path}" if self._log_path else "")
                )
            if http_ready(self.config.host, self.config.http_port):
                return
            time.sleep(0.2)
        raise TritonServerError(f"tritonserver not ready within {timeout_s:.0f} s")

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait(self) -> int:
        if self._proc is None:
            return 0
        return self._proc.wait()

    def terminate(self) -> None:
        """Ask the server to stop (SIGTERM) without waiting: safe inside a signal handler."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL at once: what a crashed or evicted server looks like to its clients.

        The whole process group goes: the Python backend's stub processes do not notice a killed parent and
        would stay behind as orphans (the server runs in its own session, so the group is exactly its own).
        """
        if self._proc is not None and self._proc.poll() is None:
            self._kill_group()
            self._proc.wait()

    def _kill_group(self) -> None:
        """SIGKILL the server's process group, then unlink the POSIX shared memory its Python-backend stubs
        had open (a killed server cannot; each stub names its region on its command line)."""
        if self._proc is None:
            return
        regions = stub_shm_regions(self._proc.pid)
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for name in regions:
            try:
                os.unlink(os.path.join("/dev/shm", name))
            except OSError:
                pass

    def stop(self, timeout_s: float = 15.0) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._kill_group()
                self._proc.wait()
        self._kill_group()  # stubs left behind by a server that exited on its own
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> TritonProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
