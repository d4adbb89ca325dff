"""GPU readings through NVML (`nvidia-ml-py`, imported lazily as `pynvml`).

No GPU, no driver, no library: `GpuReader.available` is False and `reason` says why ("no GPU" on the
dashboard) — never an exception. Each NVML query is guarded on its own because many are unsupported on some
boards (encoder utilisation on datacenter parts without NVENC, per-process memory under MIG or in containers):
an unsupported reading is None, the rest still arrive.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str
    util_percent: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    process_mem_bytes: int | None = None  # this process's memory on this device
    processes_mem_bytes: int | None = None  # all compute processes' memory on this device
    temperature_c: float | None = None
    encoder_percent: float | None = None
    decoder_percent: float | None = None

    @property
    def mem_fraction(self) -> float | None:
        if self.mem_used_bytes is None or not self.mem_total_bytes:
            return None
        return self.mem_used_bytes / self.mem_total_bytes

    def as_dict(self) -> dict[str, object]:
        frac = self.mem_fraction
        return {
            "index": self.index,
            "name": self.name,
            "util_percent": self.util_percent,
            "mem_used_bytes": self.mem_used_bytes,
            "mem_total_bytes": self.mem_total_bytes,
            "mem_percent": None if frac is None else round(100 * frac, 2),
            "process_mem_bytes": self.process_mem_bytes,
            "processes_mem_bytes": self.processes_mem_bytes,
            "temperature_c": self.temperature_c,
            "encoder_percent": self.encoder_percent,
            "decoder_percent": self.decoder_percent,
        }


@dataclass(frozen=True)
class GpuReading:
    available: bool
    reason: str = ""
    devices: tuple[GpuDevice, ...] = field(default_factory=tuple)

    def max_mem_fraction(self) -> float | None:
        fracs = [f for d in self.devices if (f := d.mem_fraction) is not None]
        return max(fracs) if fracs else None

    def as_dict(self) -> dict[str, object]:
        return {
            "available": self.available,
            "reason": self.reason,
            "devices": [d.as_dict() for d in self.devices],
        }


def _load_pynvml() -> Any:
    import pynvml  # nvidia-ml-py, in the gpu extra; without it (or a driver) there is no GPU reading

    return pynvml


class GpuReader:
    """Opens NVML once; `read()` returns every device's state. Call from the sampler thread only."""

    def __init__(self, enabled: bool = True, loader: Callable[[], Any] = _load_pynvml) -> None:
        self._enabled = enabled
        self._loader = loader
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._names: list[str] = []
        self.available = False
        self.reason = "not opened"
        self.errors = 0

    def open(self) -> None:
        if not self._enabled:
            self.reason = "no GPU (NVML disabled by config)"
            return
        try:
            nvml = self._loader()
            nvml.nvmlInit()
        except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.reason = f"no GPU ({type(exc).__name__}: {exc})".strip()
            return
        try:
            count = int(nvml.nvmlDeviceGetCount())
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            names = []
            for h in handles:
                name = nvml.nvmlDeviceGetName(h)
                names.append(name.decode() if isinstance(name, bytes) else str(name))
        except Exception as exc:
            self.reason = f"no GPU ({type(exc).__name__}: {exc})"
            self._shutdown(nvml)
            return
        if count == 0:
            self.reason = "no GPU (NVML sees 0 devices)"
            self._shutdown(nvml)
            return
        self._nvml, self._handles, self._names = nvml, handles, names
        self.available, self.reason = True, ""

    def _guard(self, fn: Callable[..., T], *args: Any) -> T | None:
        try:
            return fn(*args)
        except Exception:
            self.errors += 1
            return None

    def read(self) -> GpuReading:
        if not self.available:
            return GpuReading(available=False, reason=self.reason)
        nvml = self._nvml
        pid = os.getpid()
        devices: list[GpuDevice] = []
        for i, h in enumerate(self._handles):
            util = self._guard(nvml.nvmlDeviceGetUtilizationRates, h)
            mem = self._guard(nvml.nvmlDeviceGetMemoryInfo, h)
            temp = self._guard(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU)
            enc = self._guard(nvml.nvmlDeviceGetEncoderUtilization, h)
            dec = self._guard(nvml.nvmlDeviceGetDecoderUtilization, h)
            procs = self._guard(nvml.nvmlDeviceGetComputeRunningProcesses, h)
            own = total = None
            if procs is not None:
                used = [(p.pid, getattr(p, "usedGpuMemory", None)) for p in procs]
                total = sum(int(u) for _, u in used if isinstance(u, int))
                own = sum(int(u) for p, u in used if p == pid and isinstance(u, int))
            devices.append(
                GpuDevice(
                    index=i,
                    name=self._names[i],
                    util_percent=None if util is None else float(util.gpu),
                    mem_used_bytes=None if mem is None else int(mem.used),
                    mem_total_bytes=None if mem is None else int(mem.total),
                    process_mem_bytes=own,
                    processes_mem_bytes=total,
                    temperature_c=None if temp is None else float(temp),
                    encoder_percent=None if enc is None else float(enc[0]),
                    decoder_percent=None if dec is None else float(dec[0]),
                )
            )
        return GpuReading(available=True, devices=tuple(devices))

    def _shutdown(self, nvml: Any) -> None:
        try:
            nvml.nvmlShutdown()
        except Exception:
            self.errors += 1

    def close(self) -> None:
        if self._nvml is not None:
            self._shutdown(self._nvml)
        self._nvml, self._handles = None, []
        if self.available:
            self.available, self.reason = False, "closed"
