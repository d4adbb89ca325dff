"""A drift run's bookkeeping and its verdict, pure: the windows (latency histograms, frames sent, lost and
late, the gateway's drops, CPU, RSS and threads), the frames in flight, bounded, and what "no drift" means.

Apart from the run (bench.drift) so that the verdict is tested on made-up windows, without an hour of load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loadgen.stats import Event, FrameReceived, FrameSent
from loadgen.streaming import LogHistogram


@dataclass(frozen=True)
class DriftTargets:
    """What "no drift" means (the defaults are an operator's expectations for a show of hours)."""

    compare_s: float = 600.0  # the first and the last this-many seconds after warm-up are compared
    p95_ratio_max: float = 1.2  # end-to-end p95, last / first
    cpu_ratio_max: float = 1.2  # CPU per frame, last / first (the gateway's and the load generator's)
    stale_fraction_max: float = 0.001  # of the frames the gateway received
    end_share_factor: float = 2.0  # the last span's share of stale drops at most this times its time share
    end_share_min_drops: int = 10  # fewer drops than this in all say nothing about where they fall
    threads_growth_max: int = 2  # window median threads above the first window's median
    rss_span_s: float = 1800.0  # the RSS slope is fitted over the last this-many seconds
    rss_slope_mb_per_min_max: float = 0.1


@dataclass
class Window:
    """One window's accumulators (closed windows keep only what `to_dict` reports, plus the histogram)."""

    index: int
    start_s: float  # from the end of warm-up
    end_s: float
    latency_ms: LogHistogram = field(default_factory=LogHistogram)
    sent: int = 0
    received: int = 0
    lost: int = 0
    late_or_repeated: int = 0
    unreadable: int = 0
    gateway_frames: int = 0  # frames the gateway received (its /api/stats counter)
    stale: int = 0
    deadline: int = 0
    gateway_cpu_s: float = 0.0
    loadgen_cpu_s: float = 0.0
    server_p95_ms: list[float] = field(default_factory=list)  # /api/stats rolling p95 at each sample
    gateway_rss_mb: list[float] = field(default_factory=list)
    loadgen_rss_mb: list[float] = field(default_factory=list)
    gateway_threads: list[int] = field(default_factory=list)
    loadgen_threads: list[int] = field(default_factory=list)
    loadgen_py_blocks: list[int] = field(
        default_factory=list
    )  # the Python heap's live blocks (not the C heap)
    load_1m: list[float] = field(default_factory=list)
    probe_ms: list[float] = field(default_factory=list)  # the machine's speed (bench.machine_probe)
    send_kbps: list[float] = field(default_factory=list)  # the gateway's sessions' send rates, summed

    def gateway_cpu_ms_per_frame(self) -> float | None:
        return 1000.0 * self.gateway_cpu_s / self.gateway_frames if self.gateway_frames else None

    def loadgen_cpu_ms_per_frame(self) -> float | None:
        return 1000.0 * self.loadgen_cpu_s / self.sent if self.sent else None

    def to_dict(self) -> dict[str, Any]:
        def med(v: Sequence[float]) -> float | None:
            return round(float(np.median(v)), 2) if v else None

        def rnd(v: float | None, digits: int = 2) -> float | None:
            return None if v is None else round(v, digits)

        p50, p95, p99 = self.latency_ms.percentiles((50, 95, 99))
        return {
            "window": self.index,
            "start_min": round(self.start_s / 60, 2),
            "end_min": round(self.end_s / 60, 2),
            "latency_ms": {
                "count": self.latency_ms.count,
                "p50": rnd(p50, 1),
                "p95": rnd(p95, 1),
                "p99": rnd(p99, 1),
                "max": rnd(self.latency_ms.max if self.latency_ms.count else None, 1),
            },
            "frames": {
                "sent": self.sent,
                "received": self.received,
                "lost": self.lost,
                "late_or_repeated": self.late_or_repeated,
                "unreadable": self.unreadable,
            },
            "gateway": {
                "frames_in": self.gateway_frames,
                "stale_drops": self.stale,
                "deadline_drops": self.deadline,
                "server_p95_ms_median": med(self.server_p95_ms),
                "cpu_ms_per_frame": rnd(self.gateway_cpu_ms_per_frame(), 3),
                "rss_mb_end": rnd(self.gateway_rss_mb[-1] if self.gateway_rss_mb else None, 1),
                "rss_mb_median": med(self.gateway_rss_mb),
                "threads_median": med(self.gateway_threads),
                "threads_max": max(self.gateway_threads) if self.gateway_threads else None,
            },
            "loadgen": {
                "cpu_ms_per_frame": rnd(self.loadgen_cpu_ms_per_frame(), 3),
                "rss_mb_end": rnd(self.loadgen_rss_mb[-1] if self.loadgen_rss_mb else None, 1),
                "rss_mb_median": med(self.loadgen_rss_mb),
                "py_blocks_k_median": med([b / 1000 for b in self.loadgen_py_blocks]),
                "threads_median": med(self.loadgen_threads),
            },
            "load_1m": {
                "mean": rnd(float(np.mean(self.load_1m)) if self.load_1m else None),
                "max": rnd(max(self.load_1m) if self.load_1m else None),
            },
            "machine_probe_ms_median": med(self.probe_ms),
            "gateway_send_kbps_median": med(self.send_kbps),
        }


def _span(windows: Sequence[Window]) -> dict[str, float | None]:
    """p95 over the windows' frames together, and their CPU per frame."""
    hist = LogHistogram()
    for w in windows:
        hist.merge(w.latency_ms)
    gw_cpu = sum(w.gateway_cpu_s for w in windows)
    gw_frames = sum(w.gateway_frames for w in windows)
    lg_cpu = sum(w.loadgen_cpu_s for w in windows)
    sent = sum(w.sent for w in windows)
    probes = [v for w in windows for v in w.probe_ms]
    return {
        "p95_ms": hist.percentile(95),
        "machine_probe_ms": float(np.median(probes)) if probes else None,
        "gateway_cpu_ms_per_frame": 1000.0 * gw_cpu / gw_frames if gw_frames else None,
        "loadgen_cpu_ms_per_frame": 1000.0 * lg_cpu / sent if sent else None,
    }


def slope_per_min(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) points, per minute; None with fewer than 3 points or no
    time span."""
    if len(points) < 3:
        return None
    t = np.array([p[0] for p in points], dtype=np.float64)
    v = np.array([p[1] for p in points], dtype=np.float64)
    if t.max() - t.min() <= 0:
        return None
    return float(np.polyfit(t, v, 1)[0]) * 60.0


def _ratio(last: float | None, first: float | None) -> float | None:
    return last / first if last is not None and first else None


def at_common_speed(windows: Sequence[Window], who: str, k: int) -> dict[str, float] | None:
    """CPU per frame of the first and last `k` windows read at one machine speed: {"ratio", "per_probe_ms",
    "probe_ms"}, or None without a probe reading in every window.

    How much a process's CPU per frame follows the machine's speed is measured, not assumed: the slope of
    its per-window CPU per frame on the window's probe median (least squares over every window, never
    negative), and each window's figure is moved along that slope to the run's median probe. A process
    whose cost follows the probe one for one is read as `raw / probe ratio`; one the probe's swings do not
    reach (a busy neighbour slows a tight loop more than a process waiting on the network) keeps its raw
    ratio; a rise the probe did not share stays a rise either way."""
    cpu_s = [w.gateway_cpu_s if who == "gateway" else w.loadgen_cpu_s for w in windows]
    frames = [w.gateway_frames if who == "gateway" else w.sent for w in windows]
    if any(not w.probe_ms for w in windows) or any(f <= 0 for f in frames):
        return None
    y = 1000.0 * np.array(cpu_s) / np.array(frames, dtype=np.float64)
    p = np.array([float(np.median(w.probe_ms)) for w in windows])
    slope = float(np.polyfit(p, y, 1)[0]) if len(p) >= 3 and float(np.ptp(p)) > 1e-9 else 0.0
    slope = max(slope, 0.0)
    ref = float(np.median(p))
    adjusted = y - slope * (p - ref)
    weights = np.array(frames, dtype=np.float64)

    def span(sl: slice) -> float:
        return float(np.average(adjusted[sl], weights=weights[sl]))

    first, last = span(slice(0, k)), span(slice(len(windows) - k, len(windows)))
    if first <= 0:
        return None
    return {"ratio": last / first, "per_probe_ms": round(slope, 4), "probe_ms": round(ref, 4)}


def verdict(
    windows: Sequence[Window],
    gateway_rss: Sequence[tuple[float, float]],
    loadgen_rss: Sequence[tuple[float, float]],
    targets: DriftTargets,
) -> dict[str, Any]:
    """Each check with its numbers and whether it passed; `drift` False when every check passed.

    `windows`: the measured windows after warm-up, in order (equal lengths); `*_rss`: (seconds, MB) samples
    of the last `targets.rss_span_s` at least. With too short a run to compare a first and a last span
    the ratios are reported as None and fail (a verdict must not pass on no evidence).
    """
    if not windows:
        return {"drift": None, "checks": [], "reason": "no measured window"}
    window_s = windows[0].end_s - windows[0].start_s
    k = max(1, round(targets.compare_s / window_s)) if window_s > 0 else 1
    enough = len(windows) >= 2 * k
    first, last = _span(windows[:k]), _span(windows[-k:])
    checks: list[dict[str, Any]] = []

    def check(name: str, value: float | None, limit: float, detail: dict[str, Any]) -> None:
        ok = enough and value is not None and value <= limit
        checks.append(
            {
                "check": name,
                "value": None if value is None else round(value, 4),
                "limit": limit,
                "ok": bool(ok),
                **detail,
            }
        )

    check(
        "p95 last/first",
        _ratio(last["p95_ms"], first["p95_ms"]),
        targets.p95_ratio_max,
        {"first_ms": first["p95_ms"], "last_ms": last["p95_ms"]},
    )
    machine = _ratio(last["machine_probe_ms"], first["machine_probe_ms"])
    for who in ("gateway", "loadgen"):
        key = f"{who}_cpu_ms_per_frame"
        raw = _ratio(last[key], first[key])
        same_speed = at_common_speed(windows, who, k)
        check(
            f"{who} CPU per frame last/first" + (", on the machine's speed" if same_speed else ""),
            same_speed["ratio"] if same_speed else raw,
            targets.cpu_ratio_max,
            {
                "first_ms": first[key],
                "last_ms": last[key],
                "raw_ratio": raw,
                "machine_ratio": machine,
                **(same_speed or {}),
            },
        )
    frames_in = sum(w.gateway_frames for w in windows)
    stale = sum(w.stale for w in windows)
    check(
        "stale drops / frames",
        stale / frames_in if frames_in else None,
        targets.stale_fraction_max,
        {"stale": stale, "frames": frames_in},
    )
    tail_stale = sum(w.stale for w in windows[-k:])
    share = tail_stale / stale if stale else 0.0
    allowed = min(1.0, targets.end_share_factor * k / len(windows))
    checks.append(
        {
            "check": "stale drops not concentrated at the end",
            "value": round(share, 4),
            "limit": round(allowed, 4),
            "tail_stale": tail_stale,
            "ok": bool(enough and (stale < targets.end_share_min_drops or share <= allowed)),
        }
    )
    medians = [float(np.median(w.gateway_threads)) for w in windows if w.gateway_threads]
    growth = max(medians) - medians[0] if medians else None
    check("gateway threads above the first window", growth, targets.threads_growth_max, {"medians": medians})
    for who, series in (("gateway", gateway_rss), ("loadgen", loadgen_rss)):
        end = series[-1][0] if series else 0.0
        tail = [p for p in series if p[0] >= end - targets.rss_span_s]
        slope = slope_per_min(tail)
        check(
            f"{who} RSS slope, MB/min",
            slope,
            targets.rss_slope_mb_per_min_max,
            {"span_min": round((tail[-1][0] - tail[0][0]) / 60, 1) if tail else 0},
        )
    if not enough:  # inconclusive, not "no drift"
        reason = f"too short: {len(windows)} windows, {2 * k} needed to compare a first and a last span"
        return {"drift": None, "checks": checks, "reason": reason, "first": first, "last": last}
    return {
        "drift": not all(c["ok"] for c in checks),
        "checks": checks,
        "reason": "",
        "first": first,
        "last": last,
    }


class FrameBook:
    """Frames in flight, bounded: each sent frame waits at most `lost_after_s` for its return, then is
    counted lost in its window and forgotten."""

    def __init__(self, lost_after_s: float) -> None:
        self.lost_after_s = lost_after_s
        self._pending: dict[tuple[int, int], tuple[float, Window]] = {}
        self.window: Window | None = None  # where frames sent now are counted (None: warm-up)

    def record(self, event: Event) -> None:
        if isinstance(event, FrameSent):
            if self.window is not None:
                self.window.sent += 1
                self._pending[(event.job, event.frame_id)] = (event.t, self.window)
        elif isinstance(event, FrameReceived):
            if event.frame_id is None:
                if self.window is not None:
                    self.window.unreadable += 1
                return
            entry = self._pending.pop((event.job, event.frame_id), None)
            if entry is None:
                if self.window is not None:
                    self.window.late_or_repeated += 1
                return
            sent_t, window = entry
            window.received += 1
            window.latency_ms.add((event.t - sent_t) * 1000.0)

    def expire(self, now: float) -> None:
        gone = [key for key, (t, _) in self._pending.items() if now - t > self.lost_after_s]
        for key in gone:
            _, window = self._pending.pop(key)
            window.lost += 1

    def __len__(self) -> int:
        return len(self._pending)


def format_report(report: dict[str, Any]) -> str:
    """The per-window table and the verdict, as `make soak` prints them."""
    lines = [
        "win  minutes      p50   p95 ms  sent   lost  stale  gw ms/f  lg ms/f  gw RSS  lg RSS  gw thr  load"
        "  probe  kbps",
    ]
    for w in report["windows"]:
        lat, fr, gw, lg = w["latency_ms"], w["frames"], w["gateway"], w["loadgen"]
        lines.append(
            f"{w['window']:>3}  {w['start_min']:>4g}-{w['end_min']:<4g}{_f(lat['p50'])} {_f(lat['p95'])}"
            f"  {fr['sent']:>6} {fr['lost']:>6} {gw['stale_drops']:>6}  {_f(gw['cpu_ms_per_frame'])}"
            f"  {_f(lg['cpu_ms_per_frame'])}  {_f(gw['rss_mb_end'])}  {_f(lg['rss_mb_end'])}"
            f"  {_f(gw['threads_median'])}  {_f(w['load_1m']['mean'])}"
            f" {_f(w.get('machine_probe_ms_median'))} {_f(w.get('gateway_send_kbps_median'))}"
        )
    v = report["verdict"]
    for c in v["checks"]:
        lines.append(f"{'ok  ' if c['ok'] else 'FAIL'} {c['check']}: {c['value']} (limit {c['limit']})")
    if v.get("reason"):
        lines.append(v["reason"])
    lines.append("verdict: " + {False: "no drift", True: "DRIFT", None: "inconclusive"}[v["drift"]])
    return "\n".join(lines)


def _f(v: float | None) -> str:
    return "     -" if v is None else f"{v:6.1f}"
