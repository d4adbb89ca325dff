"""Host fingerprint for reports: a number means nothing without the machine that produced it.

Everything is read defensively: a missing /proc file, no NVML (no NVIDIA driver) or an absent package gives a
null or a reason string, never an exception.
"""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

KEY_PACKAGES: tuple[str, ...] = (
    "livefuse",
    "aiortc",
    "aioice",
    "av",
    "numpy",
    "onnxruntime",
    "onnxruntime-gpu",
    "tensorrt-cu13",
    "opencv-python-headless",
    "aiohttp",
)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def package_versions(names: tuple[str, ...] = KEY_PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def gpus() -> dict[str, Any]:
    """GPU names, memory and driver through NVML, or the reason there are none."""
    try:
        import pynvml
    except ImportError:
        return {"available": False, "reason": "nvidia-ml-py not installed", "devices": []}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound / DriverNotLoaded / ...: no usable GPU
        return {"available": False, "reason": f"no NVIDIA GPU ({type(exc).__name__})", "devices": []}
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        devices = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            name = pynvml.nvmlDeviceGetName(h)
            devices.append(
                {
                    "index": i,
                    "name": name.decode() if isinstance(name, bytes) else str(name),
                    "memory_total_bytes": int(mem.total),
                }
            )
        return {
            "available": bool(devices),
            "driver": driver.decode() if isinstance(driver, bytes) else driver,
            "devices": devices,
            "reason": "" if devices else "no devices",
        }
    except Exception as exc:
        return {"available": False, "reason": f"NVML error: {exc}", "devices": []}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def host_fingerprint() -> dict[str, Any]:
    vm = psutil.virtual_memory()
    return {
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cpu_logical": psutil.cpu_count(logical=True),
        "cpu_physical": psutil.cpu_count(logical=False),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_total_bytes": int(vm.total),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "packages": package_versions(),
        "gpu": gpus(),
    }
