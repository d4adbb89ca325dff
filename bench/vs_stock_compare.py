"""The gateway against the stock designs, pure: the server's CPU and processed frames between two samples,
each design's points and capacity, the comparison with the best stock design, and the table.

Apart from the runs (bench.vs_stock) so that the numbers a claim rests on are tested without a server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ServerSample:
    t: float  # monotonic seconds
    cpu_s: float  # server process user+system CPU seconds (all threads)
    processed: int  # frames the server processed so far (its /api/stats counter)
    scheduler: dict[str, Any] = field(default_factory=dict)  # the gateway's batcher counters ({} for stock)
    queue_wait_p50_ms: float | None = None  # the gateway's rolling queue_wait p50 (None for stock)
    client_cpu_s: float = 0.0  # this process's CPU seconds: the load generator, which runs in it
    machine_busy_s: float = 0.0  # the whole machine's busy CPU seconds (all cores, every process)


@dataclass(frozen=True)
class ServerWindow:
    seconds: float
    cpu_s: float
    processed: int
    dispatch_reasons: dict[str, int] = field(default_factory=dict)  # batches started in the window, by reason
    batches_waited: int | None = None
    queue_wait_p50_ms: float | None = None
    client_cpu_s: float = 0.0
    machine_busy_s: float = 0.0

    @property
    def cpu_ms_per_frame(self) -> float | None:
        return self.cpu_s * 1000.0 / self.processed if self.processed > 0 else None

    @property
    def processed_fps(self) -> float:
        return self.processed / self.seconds

    def cores(self) -> dict[str, float]:
        """Cores busy on average over the window: the server, the load generator (this process), the whole
        machine. Where the machine is at its core count, the server and its client are sharing it out."""
        t = max(self.seconds, 1e-9)
        return {
            "server": round(self.cpu_s / t, 3),
            "client": round(self.client_cpu_s / t, 3),
            "machine": round(self.machine_busy_s / t, 3),
        }


def server_window(samples: Sequence[ServerSample], start: float, end: float) -> ServerWindow | None:
    """CPU and processed frames between the first sample at/after `start` and the last at/before `end`.

    Both numbers come from the same pair of samples, so the ratio is exact for that interval whatever the
    sampling period; None when the window holds fewer than two samples.
    """
    inside = [s for s in samples if start <= s.t <= end]
    if len(inside) < 2:
        return None
    a, b = inside[0], inside[-1]
    ra, rb = a.scheduler.get("dispatch_reasons") or {}, b.scheduler.get("dispatch_reasons") or {}
    reasons = {k: int(v) - int(ra.get(k, 0)) for k, v in rb.items()} if isinstance(rb, dict) else {}
    waited = None
    if "batches_waited" in b.scheduler:
        waited = int(b.scheduler["batches_waited"]) - int(a.scheduler.get("batches_waited", 0))
    return ServerWindow(
        b.t - a.t,
        max(0.0, b.cpu_s - a.cpu_s),
        max(0, b.processed - a.processed),
        reasons,
        waited,
        b.queue_wait_p50_ms,
        max(0.0, b.client_cpu_s - a.client_cpu_s),
        max(0.0, b.machine_busy_s - a.machine_busy_s),
    )


@dataclass(frozen=True)
class Point:
    """One measured concurrency of one design."""

    jobs: int
    p50_ms: float | None
    p95_ms: float | None  # the capacity decision's p95 (mean over the stable windows)
    received_ratio: float
    ok: bool
    stable: bool
    cpu_ms_per_frame: float | None
    processed_fps: float | None  # server-side processed frames per second over the window
    server: ServerWindow | None = None

    def to_dict(self) -> dict[str, Any]:
        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 3)

        return {
            "jobs": self.jobs,
            "p50_ms": r(self.p50_ms),
            "p95_ms": r(self.p95_ms),
            "received_ratio": round(self.received_ratio, 4),
            "ok": self.ok,
            "stable": self.stable,
            "cpu_ms_per_frame": r(self.cpu_ms_per_frame),
            "processed_fps": r(self.processed_fps),
            "dispatch_reasons": self.server.dispatch_reasons if self.server else {},
            "batches_waited": self.server.batches_waited if self.server else None,
            "queue_wait_p50_ms": r(self.server.queue_wait_p50_ms) if self.server else None,
            "cores": self.server.cores() if self.server else None,
        }


@dataclass
class DesignResult:
    design: str
    points: list[Point] = field(default_factory=list)
    capacity: int = 0
    timed_out: bool = False
    error: str | None = None

    def at_capacity(self) -> Point | None:
        return at_capacity(self.points, self.capacity)

    def to_dict(self) -> dict[str, Any]:
        at = self.at_capacity()
        return {
            "design": self.design,
            "capacity": self.capacity,
            "timed_out": self.timed_out,
            "error": self.error,
            "at_capacity": None if at is None else at.to_dict(),
            "points": [p.to_dict() for p in self.points],
        }


def at_capacity(points: Sequence[Point], capacity: int) -> Point | None:
    """The passing point measured at the capacity (its last measurement if it was measured twice)."""
    hits = [p for p in points if p.jobs == capacity and p.ok]
    return hits[-1] if hits else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else round(a / b, 3)


def compare(results: Sequence[DesignResult], claim_ratio: float = 1.5) -> dict[str, Any]:
    """The gateway against the best stock design (highest capacity; lower p95 at capacity breaks a tie).

    `capacity_ratio` is gateway capacity / stock capacity; `p95_ratio` gateway p95 / stock p95, each at its
    own capacity; the targets (capacity ≥ 1.5x, p95 ≤ half) are evaluated as booleans, None when
    a side has no passing point.
    """
    by_name = {r.design: r for r in results}
    gw = by_name.get("gateway")
    stock = [r for r in results if r.design.startswith("stock") and r.error is None]
    if gw is None or not stock:
        return {"baseline": None}

    def key(r: DesignResult) -> tuple[int, float]:
        at = r.at_capacity()
        p95 = at.p95_ms if at is not None and at.p95_ms is not None else float("inf")
        return r.capacity, -p95

    base = max(stock, key=key)
    g_at, b_at = gw.at_capacity(), base.at_capacity()
    cap_ratio = _ratio(float(gw.capacity), float(base.capacity)) if base.capacity else None
    p95_ratio = _ratio(g_at.p95_ms if g_at else None, b_at.p95_ms if b_at else None)
    cpu_ratio = _ratio(g_at.cpu_ms_per_frame if g_at else None, b_at.cpu_ms_per_frame if b_at else None)
    # The same load for both: the gateway's p95 with as many streams as the baseline holds.
    g_same = at_capacity(gw.points, base.capacity) if base.capacity else None
    same_ratio = _ratio(g_same.p95_ms if g_same else None, b_at.p95_ms if b_at else None)
    return {
        "baseline": base.design,
        "gateway_capacity": gw.capacity,
        "baseline_capacity": base.capacity,
        "capacity_ratio": cap_ratio,
        "p95_ratio_at_capacity": p95_ratio,
        "cpu_per_frame_ratio_at_capacity": cpu_ratio,
        "p95_ratio_at_baseline_capacity": same_ratio,
        "capacity_target_met": None if cap_ratio is None else cap_ratio >= claim_ratio,
        "p95_target_met": None if p95_ratio is None else p95_ratio <= 0.5,
    }


def _cores(p: Point) -> str:
    if p.server is None:
        return "-"
    c = p.server.cores()
    return f"{c['server']:.2f}/{c['client']:.2f}/{c['machine']:.2f}"


def format_table(results: Sequence[DesignResult], comparison: dict[str, Any], title: str) -> str:
    def f(v: float | None, unit: str = "") -> str:
        return "-" if v is None else f"{v:.1f}{unit}"

    lines = [
        title,
        f"{'design':<16} {'N':>3} {'p50':>9} {'p95':>9} {'back':>6} {'cpu/frame':>10} "
        f"{'fps':>6} {'cores srv/cli/all':>17}  result",
    ]
    for r in results:
        for p in r.points:
            mark = "ok" if p.ok else "miss"
            if p.ok and p.jobs == r.capacity:
                mark = "ok  <- capacity"
            lines.append(
                f"{r.design:<16} {p.jobs:>3} {f(p.p50_ms, ' ms'):>9} {f(p.p95_ms, ' ms'):>9} "
                f"{p.received_ratio * 100:>5.1f}% {f(p.cpu_ms_per_frame, ' ms'):>10} "
                f"{f(p.processed_fps):>6} {_cores(p):>17}  {mark}"
            )
        tail = " (search timed out)" if r.timed_out else ""
        tail += f" (error: {r.error})" if r.error else ""
        lines.append(f"{r.design:<16} capacity {r.capacity}{tail}")
    if comparison.get("baseline"):
        lines.append(
            f"gateway vs {comparison['baseline']}: capacity x{comparison['capacity_ratio']}, "
            f"p95 at capacity x{comparison['p95_ratio_at_capacity']}, "
            f"CPU/frame x{comparison['cpu_per_frame_ratio_at_capacity']}, "
            f"p95 at the baseline's capacity x{comparison['p95_ratio_at_baseline_capacity']}"
        )
    return "\n".join(lines)
