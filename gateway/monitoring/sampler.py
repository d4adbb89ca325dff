"""System sampler: a daemon thread that reads CPU, memory, threads and GPU and hands each sample to a
callback.

It runs apart from the event loop so a busy loop cannot stall the readings (and the readings' /proc and NVML
calls cannot stall the loop). The interval adapts (`next_interval`, pure): slower when the machine is busy, so
the monitor takes less from an overloaded box, faster when idle. Nothing raised by a reading or by the
callback
escapes the thread; failures are counted and the next tick tries again. Its own CPU time is measured with
`time.thread_time()` so the monitor can report what it costs.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import psutil

from .gpu import GpuReader, GpuReading

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SystemSample:
    mono: float
    cpu_percent: float = 0.0
    cpu_per_core: tuple[float, ...] = ()
    process_cpu_percent: float = 0.0  # this process; 100 = one full core
    rss_bytes: int = 0
    mem_used_bytes: int = 0
    mem_total_bytes: int = 0
    mem_percent: float = 0.0
    threads: int = 0
    gpu: GpuReading = field(default_factory=lambda: GpuReading(available=False, reason="not sampled"))
    interval_s: float = 0.0  # the interval in force when this sample was taken
    cost_s: float = 0.0  # CPU seconds the sampler spent on this sample


def next_interval(
    current_s: float,
    base_s: float,
    cpu_percent: float,
    *,
    busy: float = 85.0,
    idle: float = 20.0,
    min_factor: float = 0.5,
    max_factor: float = 4.0,
) -> float:
    """Adaptive sampling: back off x1.5 per busy sample (up to max_factor*base), halve towards
    min_factor*base when idle, and drift back to base otherwise."""
    lo, hi = base_s * min_factor, base_s * max_factor
    if cpu_percent >= busy:
        nxt = current_s * 1.5
    elif cpu_percent <= idle:
        nxt = max(lo, current_s * 0.5) if current_s > lo else lo
    else:
        nxt = base_s
    return min(hi, max(lo, nxt))


class SystemProbe:
    """One reading of the machine. psutil's cpu_percent(None) compares with the previous call, so the first
    reading after construction is primed here."""

    def __init__(self, gpu: GpuReader) -> None:
        self._proc = psutil.Process(os.getpid())
        self._gpu = gpu
        psutil.cpu_percent(None, percpu=True)
        self._proc.cpu_percent(None)

    def read(self, mono: float, interval_s: float) -> SystemSample:
        per_core = tuple(float(x) for x in psutil.cpu_percent(None, percpu=True))
        total = round(sum(per_core) / len(per_core), 2) if per_core else 0.0
        vm = psutil.virtual_memory()
        with self._proc.oneshot():
            pcpu = float(self._proc.cpu_percent(None))
            rss = int(self._proc.memory_info().rss)
            threads = int(self._proc.num_threads())
        return SystemSample(
            mono=mono,
            cpu_percent=total,
            cpu_per_core=per_core,
            process_cpu_percent=pcpu,
            rss_bytes=rss,
            mem_used_bytes=int(vm.total - vm.available),
            mem_total_bytes=int(vm.total),
            mem_percent=float(vm.percent),
            threads=threads,
            gpu=self._gpu.read(),
            interval_s=interval_s,
        )


class SamplerThread:
    """Calls `on_sample(sample)` every (adaptive) interval until `stop()`; `stop()` joins, and is
    idempotent."""

    def __init__(
        self,
        on_sample: Callable[[SystemSample], None],
        base_interval_s: float = 1.0,
        nvml: bool = True,
        clock: Callable[[], float] = time.monotonic,
        adaptive: bool = True,
        gpu_reader: GpuReader | None = None,
    ) -> None:
        if base_interval_s <= 0:
            raise ValueError("base_interval_s must be positive")
        self._on_sample = on_sample
        self.base_interval_s = base_interval_s
        self.interval_s = base_interval_s
        self._adaptive = adaptive
        self._clock = clock
        self._gpu = gpu_reader if gpu_reader is not None else GpuReader(enabled=nvml)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = 0
        self.errors = 0
        self.cpu_s = 0.0  # sampler thread CPU time, all included (NVML open, psutil, callback)
        self.last_error = ""

    @property
    def gpu_reader(self) -> GpuReader:
        return self._gpu

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="livefuse-monitor-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        t0 = time.thread_time()
        probe: SystemProbe | None = None
        try:
            self._gpu.open()
            probe = SystemProbe(self._gpu)
        except Exception as exc:  # psutil itself broken: keep the thread alive, report the error
            self._fail(exc)
        self.cpu_s += time.thread_time() - t0
        while not self._stop.wait(self.interval_s):
            t0 = time.thread_time()
            try:
                if probe is None:
                    probe = SystemProbe(self._gpu)
                sample = probe.read(self._clock(), self.interval_s)
                cost = time.thread_time() - t0
                sample = replace(sample, cost_s=cost)
                self._on_sample(sample)
                self.samples += 1
                if self._adaptive:
                    self.interval_s = next_interval(self.interval_s, self.base_interval_s, sample.cpu_percent)
            except Exception as exc:
                self._fail(exc)
            self.cpu_s += time.thread_time() - t0
        try:
            self._gpu.close()
        except Exception as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        self.errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        if self.errors <= 3 or self.errors % 100 == 0:
            log.warning("monitor sampler error #%d: %s", self.errors, self.last_error, exc_info=exc)

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        t = self._thread
        if t is not None and t.is_alive() and t is not threading.current_thread():
            t.join(timeout_s)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
