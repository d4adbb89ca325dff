"""Latency and quality of the processed stream on impaired networks, one run per network profile.

Each profile runs the load generator (embedded gateway, real face swap) and reports fps, frames lost, p50/p95
latency and frozen frames (WebRTC's freeze rule), as JSON and a Markdown table. Shapers: `udp` (default)
impairs each job's datagrams in-process (loadgen.impair); `tc` runs each profile in a private network
namespace with the kernel's qdiscs on `lo`, the gateway inside it; `--per-direction` gives each direction its
own bottleneck. How each is built: docs/ARCHITECTURE.md "The network benchmark".

    flock /tmp/livefuse-bench.lock python -m bench.network --duration 20 --output reports/network.json
    python -m bench.network --shaper tc --per-direction --profiles bottleneck-600k
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gateway.webrtc.interop.dscp import parse_dscp, tos_byte
from loadgen.impair import PROFILES, Impairment

ROOT = Path(__file__).resolve().parents[1]

QDISC_PROBES = {
    "netem": ["netem", "delay", "1ms"],
    "tbf": ["tbf", "rate", "1mbit", "burst", "1600", "latency", "50ms"],
}

# lo's 64 KB MTU: tbf drops every packet larger than its burst, so a bottleneck on lo would stall TCP (the
# signalling) outright; a real path's MTU is 1500.
LO_UP = "ip link set lo mtu 1500 up"


def namespace_prefix() -> list[str]:
    """A private network namespace: plain `unshare -n` for root, with a user namespace (-r) otherwise."""
    return ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]


def probe_qdiscs() -> dict[str, str | None]:
    """For netem and tbf: None when `tc qdisc add dev lo root <kind>` works in a private namespace, else why
    not (one line: the kernel's or unshare's message)."""
    found: dict[str, str | None] = {}
    for kind, args in QDISC_PROBES.items():
        script = f"{LO_UP} && tc qdisc add dev lo root {shlex.join(args)}"
        try:
            done = subprocess.run([*namespace_prefix(), "sh", "-c", script], capture_output=True, text=True,
                                  timeout=20)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            found[kind] = f"{type(exc).__name__}: {exc}"
            continue
        lines = (done.stderr or done.stdout).strip().splitlines()
        found[kind] = None if done.returncode == 0 else (lines[-1] if lines else f"exit {done.returncode}")
    return found


def plan_tc(impairment: Impairment, qdiscs: dict[str, str | None]) -> tuple[list[list[str]], str | None, str]:
    """(tc commands, the part left to the in-process shaper as a loadgen --network spec or None, how it is
    shaped). Raises ValueError(one line) when the kernel cannot shape this profile at all."""
    needs_netem = bool(impairment.delay_ms or impairment.jitter_ms or impairment.loss)
    if impairment.rate_kbps is not None and qdiscs.get("tbf") is not None:
        raise ValueError(f"{impairment.name}: the kernel has no tbf ({qdiscs['tbf']}); use --shaper udp")
    if not needs_netem or qdiscs.get("netem") is None:
        return impairment.netem_args(), None, "kernel tc " + ("netem+tbf" if needs_netem else "tbf")
    if impairment.rate_kbps is None:
        raise ValueError(
            f"{impairment.name} needs sch_netem (delay/jitter/loss), which this kernel lacks "
            f"({qdiscs['netem']}); use --shaper udp"
        )
    shaper = "kernel tbf; delay/jitter/loss in-process (no sch_netem)"
    return [tbf_args(impairment)], impairment_rest(impairment), shaper


def impairment_rest(impairment: Impairment) -> str | None:
    """A profile's delay/jitter/loss as a loadgen --network spec (the in-process part), None if none."""
    rest = [f"delay={impairment.delay_ms:g}"] if impairment.delay_ms else []
    rest += [f"jitter={impairment.jitter_ms:g}"] if impairment.jitter_ms else []
    rest += [f"loss={impairment.loss * 100:g}%"] if impairment.loss else []
    return ",".join(rest) or None


def tbf_spec(impairment: Impairment) -> list[str]:
    """The profile's bottleneck as a tbf qdisc spec (`tbf rate ... burst ... latency ...`)."""
    assert impairment.rate_kbps is not None
    tbf = impairment.netem_args()[-1]
    return tbf[tbf.index("tbf") :]


def tbf_args(impairment: Impairment) -> list[str]:
    """The bottleneck alone as the root qdisc of lo (what `netem_args` hangs under netem)."""
    return ["tc", "qdisc", "add", "dev", "lo", "root", *tbf_spec(impairment)]


GATEWAY_DSCP = "af41"
GATEWAY_TOS = tos_byte(parse_dscp(GATEWAY_DSCP))  # 0x88: what u32 matches in the IP header's TOS byte
DIRECTIONS = {"10:": "publisher_to_gateway", "20:": "gateway_to_publisher"}


def plan_per_direction(
    impairment: Impairment, qdiscs: dict[str, str | None]
) -> tuple[list[list[str]], str | None, str]:
    """`plan_tc` for `--per-direction`: (tc commands, the in-process part, how it is shaped)."""
    if qdiscs.get("tbf") is not None:
        raise ValueError(f"{impairment.name}: the kernel has no tbf ({qdiscs['tbf']}); use --shaper udp")
    shaper = "kernel tbf per direction (htb, u32 on the gateway's DSCP); delay/jitter/loss in-process"
    return per_direction_tc(impairment), impairment_rest(impairment), shaper


def per_direction_tc(impairment: Impairment) -> list[list[str]]:
    """tc commands for one bottleneck per direction on lo (see the module's doc): htb root, a tbf leaf per
    direction with the profile's rate and queue, u32 filters on the gateway's DSCP and on TCP."""
    if impairment.rate_kbps is None:
        raise ValueError(f"{impairment.name}: --per-direction needs a profile with a bottleneck rate")
    tbf = tbf_spec(impairment)
    lo = ["tc", "qdisc", "add", "dev", "lo"]
    cls = ["tc", "class", "add", "dev", "lo", "parent", "1:"]
    flt = ["tc", "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip"]
    return [
        [*lo, "root", "handle", "1:", "htb", "default", "10"],
        [*cls, "classid", "1:10", "htb", "rate", "10gbit"],  # the leaves limit, not the classes
        [*cls, "classid", "1:20", "htb", "rate", "10gbit"],
        [*cls, "classid", "1:30", "htb", "rate", "10gbit"],
        [*lo, "parent", "1:10", "handle", "10:", *tbf],
        [*lo, "parent", "1:20", "handle", "20:", *tbf],
        [*flt, "prio", "1", "u32", "match", "ip", "protocol", "6", "0xff", "flowid", "1:30"],
        [*flt, "prio", "2", "u32", "match", "ip", "tos", hex(GATEWAY_TOS), "0xfc", "flowid", "1:20"],
    ]  # fmt: skip


def qdisc_counters_by_handle(text: str) -> dict[str, dict[str, int]]:
    """Per qdisc handle ("10:", ...) of `tc -s qdisc show dev lo`: bytes, packets, drops."""
    out: dict[str, dict[str, int]] = {}
    for block in re.split(r"(?m)^(?=qdisc )", text):
        head = re.match(r"qdisc \S+ (\S+)", block)
        if head:
            counters = qdisc_counters(block)
            if counters:
                out[head.group(1)] = counters
    return out


def by_direction(tc_stats: Path) -> dict[str, dict[str, int]] | None:
    if not tc_stats.exists():
        return None
    counters = qdisc_counters_by_handle(tc_stats.read_text())
    return {DIRECTIONS[h]: c for h, c in counters.items() if h in DIRECTIONS}


def qdisc_counters(text: str) -> dict[str, int]:
    """Bytes, packets and drops of the root qdisc from `tc -s qdisc show dev lo`."""
    match = re.search(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)", text)
    if match is None:
        return {}
    sent, pkts, dropped, over = (int(g) for g in match.groups())
    return {"bytes": sent, "packets": pkts, "dropped": dropped, "overlimits": over}


def freezes(recv_times: list[float], fps: float) -> tuple[int, float]:
    """(count, total seconds) of freezes in one job's sorted receive times. A freeze, as WebRTC counts it:
    a gap longer than max(3 frame intervals, 1 interval + 150 ms)."""
    limit = max(3.0 / fps, 1.0 / fps + 0.150)
    gaps = [b - a for a, b in zip(recv_times, recv_times[1:], strict=False) if b - a > limit]
    return len(gaps), sum(gaps)


def _loadgen_args(args: argparse.Namespace, report: Path, samples: Path) -> list[str]:
    return [
        sys.executable, "-m", "loadgen.cli", "run", "--concurrent-jobs", str(args.jobs),
        "--duration", str(args.duration),
        "--resolution", args.resolution, "--fps", str(args.fps), "--no-live",
        "--output", str(report), "--csv", str(samples), "--picture-quality",
        *(["--transport-cc"] if args.client_transport_cc else []),
        *(["--codec", args.codec] if args.codec else []),
    ]  # fmt: skip


async def _inside(
    loadgen: list[str], samples_out: Path, gateway_args: list[str], period_s: float = 0.5
) -> int:
    """Run in the namespace (tc shaper): a gateway of our own, so that its sender's bitrate and what it asks
    the publisher for (the uplink REMB cap) can be sampled from GET /sessions while loadgen (pointed at it
    with --url) runs; the samples go to `samples_out`."""
    import asyncio

    import aiohttp

    from loadgen.embedded import EmbeddedGateway, EmbeddedGatewayConfig

    samples: list[dict[str, Any]] = []
    uplink: list[dict[str, Any]] = []
    config = EmbeddedGatewayConfig(extra_args=tuple(gateway_args))
    async with EmbeddedGateway(config) as gateway, aiohttp.ClientSession() as http:
        proc = await asyncio.create_subprocess_exec(*loadgen, "--url", gateway.url, cwd=ROOT)
        t0 = time.monotonic()
        while proc.returncode is None:
            try:
                async with http.get(gateway.url + "/sessions", timeout=aiohttp.ClientTimeout(total=5)) as r:
                    data = await r.json() if r.status == 200 else {}
                for session in data.get("sessions", []):
                    t_s = round(time.monotonic() - t0, 2)
                    for codec, bitrate in (session.get("send_bitrate") or {}).items():
                        samples.append({"t_s": t_s, "codec": codec, **bitrate})
                    if session.get("uplink"):
                        uplink.append({"t_s": t_s, **session["uplink"]})
            except (aiohttp.ClientError, TimeoutError, ValueError):
                pass
            try:
                await asyncio.wait_for(proc.wait(), period_s)
            except TimeoutError:
                pass
        samples_out.write_text(json.dumps({"send": samples, "uplink": uplink}))
        return proc.returncode


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    middle = ordered[len(ordered) // 2]
    return {
        "first": round(values[0], 3),
        "min": round(ordered[0], 3),
        "median": round(middle, 3),
        "last": round(values[-1], 3),
    }


def bitrate_summary(samples: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The gateway sender's target and sent bitrate over the run, the receiver's REMB and the delay-based
    rate (kbit/s), and the round trip and queueing delay its receiver reports gave (ms)."""
    if not samples:
        return None
    targets = [s["target_bps"] / 1000 for s in samples if s.get("target_bps")]
    sent = [s["sent_bps"] / 1000 for s in samples if s.get("sent_bps")]
    receivers = [r for s in samples for r in s.get("receivers", [])]
    remb = [r["remb_bps"] / 1000 for r in receivers if r.get("remb_bps")]
    delay_based = [r["delay_based_bps"] / 1000 for r in receivers if r.get("delay_based_bps")]
    spread = _spread
    return {
        "samples": len(samples),
        "target_kbps": spread(targets),
        "sent_kbps": spread(sent),
        "remb_kbps": spread(remb),
        "delay_based_kbps": spread(delay_based),
        "rtt_ms": spread([r["rtt_ms"] for r in receivers if r.get("rtt_ms") is not None]),
        "queue_ms": spread([r["queue_ms"] for r in receivers if r.get("queue_ms") is not None]),
        "changes": samples[-1].get("changes"),
        "series": bitrate_series(samples),
    }


def bitrate_series(samples: list[dict[str, Any]]) -> list[list[float | None]]:
    """Per sample: [t_s, target, sent, delay-based (kbit/s), rtt, queue (ms), loss] of the first receiver:
    how the sender's rate followed the path over the run."""
    rows: list[list[float | None]] = []
    for s in samples:
        receiver = (s.get("receivers") or [{}])[0]
        delay_based = receiver.get("delay_based_bps")
        rows.append(
            [
                s.get("t_s"),
                round(s.get("target_bps", 0) / 1000),
                round(s.get("sent_bps", 0) / 1000),
                round(delay_based / 1000) if delay_based else None,
                receiver.get("rtt_ms"),
                receiver.get("queue_ms"),
                receiver.get("loss"),
            ]
        )
    return rows


def uplink_summary(samples: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the gateway saw of the publisher's stream and asked it for
    (gateway.webrtc.congestion.uplink_rate):
    loss per window, received kbit/s, the REMB cap (kbit/s; None = uncapped) and aiortc's own estimate."""
    if not samples:
        return None
    windows = [s["last_window"] for s in samples if s.get("last_window")]
    caps = [s["cap_kbps"] for s in samples if s.get("cap_kbps") is not None]
    return {
        "samples": len(samples),
        "loss": _spread([w["loss"] for w in windows]),
        "received_kbps": _spread([w["received_kbps"] for w in windows]),
        "cap_kbps": _spread(caps),
        "capped_share": round(len(caps) / len(samples), 3),
        "delay_based_kbps": _spread([s["delay_based_kbps"] for s in samples if s.get("delay_based_kbps")]),
        "decreases": samples[-1].get("decreases"),
        "rembs_sent": samples[-1].get("rembs_sent"),
        "rembs_capped": samples[-1].get("rembs_capped"),
    }


def run_profile(
    name: str, args: argparse.Namespace, work: Path, qdiscs: dict[str, str | None] | None = None
) -> dict[str, Any]:
    report, samples, tc_stats = work / f"{name}.json", work / f"{name}.csv", work / f"{name}.tc"
    bitrate_file = work / f"{name}.bitrate.json"
    command = _loadgen_args(args, report, samples)
    impairment = PROFILES[name]
    shaper = "in-process"
    if args.shaper == "udp":
        command += ["--network", name]
    else:
        plan = plan_per_direction if args.per_direction else plan_tc
        try:
            tc_commands, rest, shaper = plan(impairment, qdiscs if qdiscs is not None else probe_qdiscs())
        except ValueError as exc:
            return {"profile": name, "error": str(exc)}
        gateway_args = list(args.gateway_arg)
        if args.per_direction:
            gateway_args.append(f"--media-dscp={GATEWAY_DSCP}")
        if rest:
            command += ["--network", rest]
        command = [sys.executable, "-m", "bench.network", "--inside-namespace", str(bitrate_file),
                   *gateway_args, "--", *command]  # fmt: skip
        tc = " && ".join(shlex.join(c) for c in tc_commands) or "true"
        script = (
            f"{LO_UP} && {tc} && {{ {shlex.join(command)}; rc=$?; "
            f"tc -s qdisc show dev lo > {shlex.quote(str(tc_stats))}; exit $rc; }}"
        )
        command = [*namespace_prefix(), "sh", "-c", script]
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=args.duration + 180)
    elapsed = time.monotonic() - started
    if not report.exists():
        return {"profile": name, "error": (done.stderr or done.stdout)[-600:]}
    run = json.loads(report.read_text())["runs"][0]
    by_job: dict[str, list[float]] = {}
    with samples.open() as f:
        for row in csv.DictReader(f):
            by_job.setdefault(row["job"], []).append(float(row["recv_s"]))
    frozen = [freezes(sorted(times), args.fps) for times in by_job.values()]
    gateway = run.get("gateway") or {}
    sampled = json.loads(bitrate_file.read_text()) if bitrate_file.exists() else {}
    if isinstance(sampled, list):  # the format before uplink sampling: sender samples only
        sampled = {"send": sampled}
    return {
        "profile": name,
        "impairment": impairment.describe(),
        "shaper": shaper,
        "fps_per_job": run["fps_per_job"]["mean"],
        "sent": run["frames"]["sent"],
        "received": run["frames"]["received"],
        "lost_pct": round(100.0 * run["frames"]["lost"] / max(run["frames"]["sent"], 1), 1),
        "p50_ms": run["latency_ms"]["p50"],
        "p95_ms": run["latency_ms"]["p95"],
        # loadgen.fidelity: the returned pictures against those sent, the swapped face out (dB)
        "psnr_db_p50": (run.get("picture_psnr_db") or {}).get("p50"),
        "psnr_db_p5": (run.get("picture_psnr_db") or {}).get("p5"),
        "freezes": sum(n for n, _ in frozen),
        "frozen_s": round(sum(s for _, s in frozen), 2),
        "gateway_cpu": gateway.get("cpu_percent"),
        # tc: the kernel's count at lo's root qdisc over the whole run (start-up and signalling included)
        "qdisc": qdisc_counters(tc_stats.read_text()) if tc_stats.exists() else None,
        # --per-direction: each direction's tbf on its own
        "qdisc_by_direction": by_direction(tc_stats) if args.per_direction else None,
        "elapsed_s": round(elapsed, 1),  # the whole run in the namespace: gateway start-up, join, stop
        # tc: the gateway's VP8 sender, sampled from GET /sessions every 0.5 s
        # (gateway.webrtc.congestion.bitrate)
        "gateway_bitrate": bitrate_summary(sampled.get("send") or []),
        # tc: what the gateway saw of the publisher's stream and the REMB cap it sent back
        "gateway_uplink": uplink_summary(sampled.get("uplink") or []),
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| profile | impairment (each way) | fps | lost | p50 ms | p95 ms | freezes | frozen s "
        "| PSNR dB p50 / p5 |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['profile']} | error: {r['error'][:60]!r} | | | | | | | |")
            continue
        p50 = f"{r['p50_ms']:.0f}" if r["p50_ms"] is not None else "-"
        p95 = f"{r['p95_ms']:.0f}" if r["p95_ms"] is not None else "-"
        psnr = f"{r['psnr_db_p50']:.1f} / {r['psnr_db_p5']:.1f}" if r.get("psnr_db_p50") is not None else "-"
        lines.append(
            f"| {r['profile']} | {r['impairment']} | {r['fps_per_job']:.1f} | {r['lost_pct']:.1f} % | "
            f"{p50} | {p95} | {r['freezes']} | {r['frozen_s']:.2f} | {psnr} |"
        )
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--inside-namespace":  # the tc shaper's child, see _inside
        import asyncio

        sep = sys.argv.index("--")
        return asyncio.run(_inside(sys.argv[sep + 1 :], Path(sys.argv[2]), sys.argv[3:sep]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--profiles", default=",".join(PROFILES), help="comma list of loadgen.impair profiles"
    )
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--resolution", default="320x240")
    parser.add_argument("--fps", type=float, default=15.0)
    parser.add_argument("--shaper", choices=("udp", "tc"), default="udp")
    parser.add_argument(
        "--client-transport-cc",
        action="store_true",
        help="the load generator's jobs offer transport-cc and return its feedback, as "
        "browsers do (loadgen --transport-cc)",
    )
    parser.add_argument(
        "--codec",
        choices=("VP8", "H264"),
        default=None,
        help="the load generator's jobs offer only this video codec (loadgen --codec)",
    )
    parser.add_argument(
        "--gateway-arg",
        action="append",
        default=[],
        help="extra argument for the gateway the tc shaper runs (repeatable), e.g. "
        "--gateway-arg=--no-uplink-loss-cap",
    )
    parser.add_argument(
        "--per-direction",
        action="store_true",
        help="tc: one bottleneck per direction (htb + u32 on the gateway's DSCP mark)",
    )
    parser.add_argument(
        "--output", type=Path, help="write the JSON report here (default: none, printed only)"
    )
    args = parser.parse_args()
    if args.per_direction and args.shaper != "tc":
        parser.error("--per-direction shapes with the kernel: add --shaper tc")
    names = [n.strip() for n in args.profiles.split(",") if n.strip()]
    unknown = [n for n in names if n not in PROFILES]
    if unknown:
        parser.error(f"unknown profile(s) {', '.join(unknown)} (known: {', '.join(PROFILES)})")
    rows = []
    qdiscs = probe_qdiscs() if args.shaper == "tc" else None
    if qdiscs is not None:
        for kind, why in qdiscs.items():
            print(f"kernel qdisc {kind}: " + ("available" if why is None else f"NOT available ({why})"))
    with tempfile.TemporaryDirectory(prefix="livefuse-net-") as tmp:
        for name in names:
            rows.append(run_profile(name, args, Path(tmp), qdiscs))
            print(json.dumps(rows[-1]), flush=True)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        config = vars(args) | {"output": str(args.output)}
        args.output.write_text(json.dumps({"kind": "network", "config": config, "profiles": rows}, indent=2))
    print(table(rows))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
