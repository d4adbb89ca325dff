"""The sampler thread and NVML reader: adaptive interval, survives a missing GPU and failing callbacks."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from gateway.monitoring.gpu import GpuReader
from gateway.monitoring.monitor import Monitor, MonitorConfig
from gateway.monitoring.sampler import SamplerThread, SystemSample, next_interval


def test_next_interval_backs_off_under_load_and_speeds_up_when_idle() -> None:
    base = 1.0
    iv = base
    for _ in range(10):
        iv = next_interval(iv, base, cpu_percent=95.0)
    assert iv == 4.0  # capped at 4x
    assert next_interval(4.0, base, cpu_percent=50.0) == base
    assert next_interval(base, base, cpu_percent=5.0) == 0.5
    assert next_interval(0.5, base, cpu_percent=5.0) == 0.5


def _raise_nvml(*_: object) -> None:
    raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)


def test_gpu_reader_reports_no_gpu_when_nvml_init_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pynvml, "nvmlInit", _raise_nvml)
    r = GpuReader()
    r.open()
    assert not r.available
    assert r.reason.startswith("no GPU")
    reading = r.read()
    assert not reading.available and reading.devices == () and reading.max_mem_fraction() is None
    r.close()


def test_gpu_reader_without_the_library_at_all() -> None:
    def missing() -> Any:
        raise ImportError("No module named 'pynvml'")

    r = GpuReader(loader=missing)
    r.open()
    assert not r.available and "ImportError" in r.reason


class _FakeNvml:
    """Two boards: one full-featured, one without NVENC/NVDEC or per-process accounting."""

    NVML_TEMPERATURE_GPU = 0

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.shut = 0

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None:
        self.shut += 1

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return b"Fake H200" if h == 0 else b"Fake T4"

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return SimpleNamespace(gpu=70 + h, memory=10)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return SimpleNamespace(used=90 * 2**30, total=100 * 2**30, free=10 * 2**30)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return 55

    def nvmlDeviceGetEncoderUtilization(self, h: int) -> list[int]:
        if h == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [12, 167000]

    def nvmlDeviceGetDecoderUtilization(self, h: int) -> list[int]:
        if h == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [3, 167000]

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        if h == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [
            SimpleNamespace(pid=self.pid, usedGpuMemory=2 * 2**30),
            SimpleNamespace(pid=1, usedGpuMemory=5 * 2**30),
            SimpleNamespace(pid=2, usedGpuMemory=None),
        ]


def test_gpu_reader_reads_each_field_and_tolerates_unsupported_ones() -> None:
    import os

    fake = _FakeNvml(os.getpid())
    r = GpuReader(loader=lambda: fake)
    r.open()
    assert r.available
    reading = r.read()
    d0, d1 = reading.devices
    assert d0.name == "Fake H200" and d0.util_percent == 70.0 and d0.temperature_c == 55.0
    assert d0.process_mem_bytes == 2 * 2**30 and d0.processes_mem_bytes == 7 * 2**30
    assert d0.encoder_percent == 12.0 and d0.decoder_percent == 3.0
    assert d1.util_percent == 71.0 and d1.encoder_percent is None and d1.process_mem_bytes is None
    assert reading.max_mem_fraction() == pytest.approx(0.9)
    assert reading.as_dict()["devices"][0]["mem_percent"] == 90.0  # type: ignore[index]
    assert r.errors == 3
    r.close()
    r.close()
    assert fake.shut == 1


def test_sampler_thread_survives_missing_nvml_and_a_failing_callback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pynvml, "nvmlInit", _raise_nvml)
    got: list[SystemSample] = []
    calls = 0
    enough = threading.Event()

    def on_sample(s: SystemSample) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("a consumer bug must not kill the sampler")
        got.append(s)
        if len(got) >= 3:
            enough.set()

    st = SamplerThread(on_sample, base_interval_s=0.02, adaptive=False)
    st.start()
    assert enough.wait(10), "sampler stopped producing samples"
    st.stop()
    st.stop()
    assert not st.running
    assert st.errors == 1 and "RuntimeError" in st.last_error
    s = got[-1]
    assert not s.gpu.available and s.gpu.reason.startswith("no GPU")
    assert s.rss_bytes > 0 and s.mem_total_bytes > 0 and s.threads >= 2 and len(s.cpu_per_core) >= 1
    assert st.cpu_s > 0


async def test_monitor_runs_without_gpu_and_closes_idempotently(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pynvml, "nvmlInit", _raise_nvml)
    mon = Monitor(MonitorConfig(sample_interval_s=0.02, adaptive_sampling=False))
    await mon.start()
    deadline = time.monotonic() + 10
    while mon.sampler.samples < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    snap = mon.snapshot_dict()
    gpu = snap["gpu"]
    assert isinstance(gpu, dict) and gpu["available"] is False and str(gpu["reason"]).startswith("no GPU")
    assert snap["system"]["rss_bytes"] > 0  # type: ignore[index]
    await mon.close()
    await mon.close()
    assert not mon.sampler.running
