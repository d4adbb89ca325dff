"""How many sessions this replica can hold, and how much of that it uses: the autoscaler's two numbers.

Why not the batch workers alone (the earlier `controller.estimate_capacity`, now the "workers" resource
below): on the CPU a frame's cost is half codecs and transport (VP8 decode + encode, aiortc's per-packet
Python, RTP/SRTP), which run beside the batch workers on the same cores. An estimate from worker time said
12-13 sessions where 6 was measured. Here every resource a session consumes is a budget of its own,
measured, not modelled:

- cpu:     this process's CPU (all threads: decode, encode, transport, pipeline, event loop), in cores, over
           the cores it may use: affinity and the cgroup quota (a pod's CPU limit), less what other
           processes on the machine are using (measured on the shared 2-core box: with neighbours busy,
           the latency limit came at 4 sessions while "2 cores" would have promised 6);
- gpu:     the busiest GPU's utilisation (None without a GPU, or when inference runs remotely on Triton);
- workers: the batch workers' busy time over `parallelism` workers (the latency-critical queue).

Each resource's cost per session is (used - idle baseline) / open sessions; capacity is the smallest
`(available * target - baseline) / cost` over the resources; utilisation is the largest `used / available`,
the fraction of the binding resource in use — the gauge a horizontal autoscaler targets (e.g. 0.7). Pure.
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
