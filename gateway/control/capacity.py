"""How many sessions this replica can hold, and how much of that it uses: the autoscaler's two numbers. Pure.

On the CPU half a frame's cost is codecs and transport beside the batch workers, so every resource a session
consumes is a budget of its own, measured: `cpu` (this process, over the cores it may use: affinity, cgroup
quota, less what other processes use), `gpu` (the busiest GPU's utilisation) and `workers` (the batch
workers' busy time over `parallelism`). Each one's cost per session is (used - idle baseline) / sessions;
capacity is the smallest (available * target - baseline) / cost; utilisation, the largest used / available,
is the gauge a horizontal autoscaler targets.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceUse:
    name: str
    used: float  # units in use now (cores, GPU fraction, busy workers)
    available: float  # units this replica may use
    baseline: float = 0.0  # units used with no session (idle process, sampler, ...)


@dataclass(frozen=True)
class CapacityEstimate:
    capacity_sessions: int | None  # None: no session yet, nothing measured
    utilisation: float  # 0..1+ of the binding resource
    binding: str | None  # the resource that limits first
    per_resource: dict[str, int]  # capacity by each resource alone

    def to_dict(self) -> dict[str, object]:
        return {
            "capacity_sessions": self.capacity_sessions,
            "utilisation": round(self.utilisation, 4),
            "binding": self.binding,
            "per_resource": dict(self.per_resource),
        }


def estimate(resources: list[ResourceUse], sessions: int, target: float = 0.9) -> CapacityEstimate:
    """Capacity (sessions at `target` use of the binding resource) and utilisation from measured use."""
    usable = [r for r in resources if r.available > 0]
    utilisation = max((r.used / r.available for r in usable), default=0.0)
    if sessions <= 0:
        return CapacityEstimate(None, utilisation, None, {})
    per: dict[str, int] = {}
    for r in usable:
        cost = (r.used - r.baseline) / sessions
        if cost <= 1e-9:
            continue  # this resource shows no per-session cost: it does not bound the count
        per[r.name] = max(0, math.floor((r.available * target - r.baseline) / cost + 1e-9))
    if not per:
        return CapacityEstimate(None, utilisation, None, {})
    binding = min(per, key=lambda k: per[k])
    return CapacityEstimate(per[binding], utilisation, binding, per)


def usable_cores(cgroup_root: str = "/sys/fs/cgroup") -> float:
    """Cores this process may use: CPU affinity, capped by a cgroup v2 quota (`cpu.max`, a pod's limit)."""
    try:
        cores = float(len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        cores = float(os.cpu_count() or 1)
    try:
        with open(os.path.join(cgroup_root, "cpu.max")) as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cores = min(cores, float(quota) / float(period))
    except (OSError, ValueError):
        pass
    return max(cores, 0.01)
