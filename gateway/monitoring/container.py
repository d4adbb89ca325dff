"""What the process runs as and inside: `livefuse_build_info` and the container's own memory (cgroup).

`livefuse_memory_{used,total}_bytes` describe the host (psutil): on a Kubernetes node that is every pod's
memory, not this one's. The container's figures come from its cgroup, as the kubelet and the OOM killer
see them: cgroup v2 `memory.current` / `memory.max` / `memory.stat` (inactive_file), or v1
`memory.usage_in_bytes` / `memory.limit_in_bytes` / `memory.stat` (total_inactive_file). The working set
(usage less inactive page cache) is what `container_memory_working_set_bytes` shows and what eviction
reads. No limit (v2 `max`, v1's huge sentinel) exports no limit series. Read at scrape time, a few small
files; nothing is cached, so a changed limit shows at the next scrape.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

NO_LIMIT_V1 = 1 << 60  # v1 reports "unlimited" as a page-rounded 2**63 - 1


@dataclass(frozen=True)
class CgroupMemory:
    used_bytes: int
    working_set_bytes: int
    limit_bytes: int | None  # None: no limit


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _stat(path: str, key: str) -> int:
    text = _read(path) or ""
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def read_cgroup_memory(root: str = "/sys/fs/cgroup") -> CgroupMemory | None:
    """This container's memory from cgroup v2 (or v1) files under `root`; None when neither is there."""
    current = _read(os.path.join(root, "memory.current"))
    if current is not None and current.isdigit():
        used = int(current)
        inactive = _stat(os.path.join(root, "memory.stat"), "inactive_file")
        limit = _read(os.path.join(root, "memory.max"))
        return CgroupMemory(used, max(0, used - inactive), int(limit) if limit and limit.isdigit() else None)
    v1 = os.path.join(root, "memory")
    usage = _read(os.path.join(v1, "memory.usage_in_bytes"))
    if usage is not None and usage.isdigit():
        used = int(usage)
        inactive = _stat(os.path.join(v1, "memory.stat"), "total_inactive_file")
        limit = _read(os.path.join(v1, "memory.limit_in_bytes"))
        known = limit is not None and limit.isdigit() and int(limit) < NO_LIMIT_V1
        return CgroupMemory(used, max(0, used - inactive), int(limit) if known and limit else None)
    return None


class ContainerCollector(Collector):
    """`livefuse_build_info{version,aiortc,av} 1` and `livefuse_container_memory_*_bytes`."""

    def __init__(self, versions: dict[str, str], memory: Callable[[], CgroupMemory | None]) -> None:
        self._versions = versions
        self._memory = memory

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "livefuse_build_info",
            "Always 1: the livefuse, aiortc and av versions this process runs",
            labels=["version", "aiortc", "av"],
        )
        info.add_metric([self._versions["livefuse"], self._versions["aiortc"], self._versions["av"]], 1)
        yield info
        memory = self._memory()
        if memory is None:
            return
        yield GaugeMetricFamily(
            "livefuse_container_memory_used_bytes",
            "This container's memory (cgroup), page cache included",
            value=memory.used_bytes,
        )
        yield GaugeMetricFamily(
            "livefuse_container_memory_working_set_bytes",
            "This container's memory less inactive page cache: what eviction and the OOM killer weigh",
            value=memory.working_set_bytes,
        )
        if memory.limit_bytes is not None:
            yield GaugeMetricFamily(
                "livefuse_container_memory_limit_bytes",
                "This container's memory limit (cgroup memory.max; a pod's limits.memory)",
                value=memory.limit_bytes,
            )


def container_collector(versions: dict[str, str], root: str = "/sys/fs/cgroup") -> Callable[[], Collector]:
    """A factory for the app's extra collectors (gateway.monitoring.routes.EXTRA_COLLECTORS)."""
    return lambda: ContainerCollector(versions, lambda: read_cgroup_memory(root))
