"""The front process's numbers (gateway.front) for /api/stats ("front") and /metrics (livefuse_front_*).

Why: the monitor samples its own process; the front is another one, and an operator must see it as well:
that it runs, how often it had to be restarted, what it costs. Read at request time from /proc (psutil), in
the media process; nothing here runs when there is no front process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace

import psutil
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


@dataclass(frozen=True)
class FrontStatus:
    running: bool
    pid: int | None = None
    restarts: int = 0
    nice: int | None = None
    cpus: tuple[int, ...] = ()  # the CPUs it may run on
    rss_bytes: int = 0
    cpu_seconds: float = 0.0


def read_status(pid: int | None, restarts: int) -> FrontStatus:
    if pid is None:
        return FrontStatus(running=False, restarts=restarts)
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            times = proc.cpu_times()
            return FrontStatus(
                running=proc.status() != psutil.STATUS_ZOMBIE,
                pid=pid,
                restarts=restarts,
                nice=int(proc.nice()),
                cpus=tuple(sorted(proc.cpu_affinity() or ())),
                rss_bytes=int(proc.memory_info().rss),
                cpu_seconds=round(times.user + times.system, 3),
            )
    except psutil.Error:
        return FrontStatus(running=False, pid=pid, restarts=restarts)


class FrontSection:
    """`name` in /api/stats; `data()` its JSON; `collector()` its Prometheus families."""

    name = "front"

    def __init__(self, status: Callable[[], FrontStatus]) -> None:
        self._status = status

    def data(self) -> dict[str, object]:
        return asdict(self._status())

    def collector(self) -> Collector:
        """The CPU counter keeps what earlier front processes used (a restart would set it back)."""
        from gateway.monitoring.prometheus import MonotonicTotals

        carried = MonotonicTotals()

        def status() -> FrontStatus:
            s = self._status()
            alive = {s.pid: {"cpu_seconds": s.cpu_seconds}} if s.running else {}
            return replace(s, cpu_seconds=carried.update(alive).get("cpu_seconds", 0.0))

        return _FrontCollector(status)


class _FrontCollector(Collector):
    def __init__(self, status: Callable[[], FrontStatus]) -> None:
        self._status = status

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        s = self._status()
        yield GaugeMetricFamily(
            "livefuse_front_up", "1 while the front process (HTTP) runs", value=int(s.running)
        )
        yield CounterMetricFamily(
            "livefuse_front_restarts", "Times the front process died and was started again", value=s.restarts
        )
        yield GaugeMetricFamily(
            "livefuse_front_rss_bytes", "Front process resident memory", value=s.rss_bytes
        )
        yield CounterMetricFamily(
            "livefuse_front_cpu_seconds", "Front process CPU time (user + system)", value=s.cpu_seconds
        )
