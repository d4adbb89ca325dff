"""Latency and quality of the processed stream on impaired networks: the load generator (embedded gateway,
real face swap) once per network profile, then per profile: fps, frames lost, p50/p95 latency and frozen
frames (a gap between returned frames longer than max(3 frame intervals, 1 interval + 150 ms), WebRTC's
freeze definition), written as JSON and printed as a Markdown table.

Shapers: `udp` (default) impairs every datagram of each loadgen job's connection in-process (loadgen.impair:
netem's loss/delay/jitter model, tbf's bottleneck); `tc` runs each run inside a private network namespace
(`unshare -n`, root) with `tc netem` / `tbf` on its `lo` instead — for kernels that have sch_netem
(this project's VMs do not). Traffic stays on 127.0.0.1 either way.

    flock /tmp/livefuse-bench.lock python scripts/bench_network.py --duration 20 --output reports/network.json
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loadgen.impair import PROFILES  # noqa: E402


def freezes(recv_times: list[float], fps: float) -> tuple[int, float]:
    """(count, total seconds) of freezes in one job's sorted receive times."""
    limit = max(3.0 / fps, 1.0 / fps + 0.150)
    gaps = [b - a for a, b in zip(recv_times, recv_times[1:], strict=False) if b - a > limit]
    return len(gaps), sum(gaps)


def _loadgen_args(args: argparse.Namespace, report: Path, samples: Path) -> list[str]:
    return [
        sys.executable, "-m", "loadgen.cli", "--concurrent-jobs", str(args.jobs),
        "--duration", str(args.duration),
        "--resolution", args.resolution, "--fps", str(args.fps), "--no-live",
        "--output-report", str(report), "--csv", str(samples),
    ]  # fmt: skip


def run_profile(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    report, samples = work / f"{name}.json", work / f"{name}.csv"
    command = _loadgen_args(args, report, samples)
    impairment = PROFILES[name]
    if args.shaper == "udp":
        command += ["--network", name]
    else:
        tc = " && ".join(shlex.join(c) for c in impairment.netem_args()) or "true"
        command = ["unshare", "-n", "sh", "-c", f"ip link set lo up && {tc} && exec {shlex.join(command)}"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=args.duration + 180)
    if not report.exists():
        return {"profile": name, "error": (done.stderr or done.stdout)[-600:]}
    run = json.loads(report.read_text())["runs"][0]
    by_job: dict[str, list[float]] = {}
    with samples.open() as f:
        for row in csv.DictReader(f):
            by_job.setdefault(row["job"], []).append(float(row["recv_s"]))
    frozen = [freezes(sorted(times), args.fps) for times in by_job.values()]
    gateway = run.get("gateway") or {}
    return {
        "profile": name,
        "impairment": impairment.describe(),
        "shaper": args.shaper,
        "fps_per_job": run["fps_per_job"]["mean"],
        "sent": run["frames"]["sent"],
        "received": run["frames"]["received"],
        "lost_pct": round(100.0 * run["frames"]["lost"] / max(run["frames"]["sent"], 1), 1),
        "p50_ms": run["latency_ms"]["p50"],
        "p95_ms": run["latency_ms"]["p95"],
        "freezes": sum(n for n, _ in frozen),
        "frozen_s": round(sum(s for _, s in frozen), 2),
        "gateway_cpu": gateway.get("cpu_percent"),
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = "| profile | impairment (each way) | fps | lost | p50 ms | p95 ms | freezes | frozen s |"
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['profile']} | error: {r['error'][:60]!r} | | | | | | |")
            continue
        p50 = f"{r['p50_ms']:.0f}" if r["p50_ms"] is not None else "-"
        p95 = f"{r['p95_ms']:.0f}" if r["p95_ms"] is not None else "-"
        lines.append(
            f"| {r['profile']} | {r['impairment']} | {r['fps_per_job']:.1f} | {r['lost_pct']:.1f} % | "
            f"{p50} | {p95} | {r['freezes']} | {r['frozen_s']:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--profiles", default=",".join(PROFILES), help="comma list of loadgen.impair profiles"
    )
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--resolution", default="320x240")
    parser.add_argument("--fps", type=float, default=15.0)
    parser.add_argument("--shaper", choices=("udp", "tc"), default="udp")
    parser.add_argument("--output", type=Path, default=ROOT / "reports" / "network.json")
    args = parser.parse_args()
    names = [n.strip() for n in args.profiles.split(",") if n.strip()]
    unknown = [n for n in names if n not in PROFILES]
    if unknown:
        parser.error(f"unknown profile(s) {', '.join(unknown)} (known: {', '.join(PROFILES)})")
    rows = []
    with tempfile.TemporaryDirectory(prefix="livefuse-net-") as tmp:
        for name in names:
            rows.append(run_profile(name, args, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"kind": "network", "config": vars(args) | {"output": str(args.output)},
                                       "profiles": rows}, indent=2))  # fmt: skip
    print(table(rows))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
