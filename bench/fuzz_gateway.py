"""Attack a gateway of our own on 127.0.0.1 and report what it felt (`make fuzz`, `make soak`).

    python -m bench.fuzz_gateway {fuzz,soak,kill9,attack,cost} ... --output reports/fuzz.json

Every run starts its own loopback gateway (tenant "live" owns one real WHIP publisher, "fuzz" is the
attacker), stops it at the end, and is bounded in requests and time. It prints requests, status counts, 5xx
(must be 0), the live session's fps, latency and loss before and during the attack, and the gateway's RSS,
fd and thread trend. Exit code 1 when any 5xx was answered, the gateway died, or the live session broke.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import resource
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.fuzz import cost_by_kind, real_offer, run_fuzz
from bench.fuzz_cases import Bombs, FuzzCase, generate_cases
from bench.fuzz_report import change_vs_quiet, delta, problems, report_lines
from bench.fuzz_rig import Rig, attacker_setup, fronts, start_decoy
from bench.probes import process_cpu_s

MAX_BODY = 8 * 1024 * 1024


async def _attack(
    rig: Rig, args: argparse.Namespace, requests: int, rate: float | None, seed: int, tmp: Path
) -> tuple[dict[str, Any], float, float]:
    """Run the fuzzer in a child process at `--attacker-nice` (a real attacker is on another machine: here it
    must not take the CPU the gateway and the live probe need). Returns its result and its attack window."""
    out = tmp / f"attack-{seed}.json"
    cpus = {args.split_cores[1]} if args.split_cores else None
    decoy = await start_decoy(cpus) if args.decoy else None
    argv = [
        sys.executable,
        "-m",
        "bench.fuzz_gateway",
        "attack",
        "--url",
        decoy[1] if decoy is not None else rig.gateway.url,
        # "--flag=value": a token or session id may start with "-", which argparse would take for a flag
        f"--token={rig.fuzz_token}",
        f"--live-session={rig.live_session or ''}",
        "--requests",
        str(requests),
        "--seed",
        str(seed),
        "--concurrency",
        str(args.concurrency),
        "--output",
        str(out),
    ]
    if rate:
        argv += ["--rate", str(rate)]
    if args.kinds:
        argv += ["--kinds", args.kinds]
    nice = args.attacker_nice
    setup = (lambda: attacker_setup(nice, cpus)) if nice or cpus else None
    proc = await asyncio.create_subprocess_exec(*argv, preexec_fn=setup)
    await proc.wait()
    if decoy is not None:
        decoy[0].terminate()
        await decoy[0].wait()
    data = json.loads(out.read_text())
    return data["fuzz"], data["t0"], data["t1"]


async def cmd_attack(args: argparse.Namespace) -> dict[str, Any]:
    """The attacker alone (spawned by fuzz and soak): build the cases, then send them."""
    cases = await _cases(args, args.token, live_session=args.live_session or None)
    t0 = time.monotonic()  # CLOCK_MONOTONIC: the same clock in the parent process
    result = await run_fuzz(args.url, cases, concurrency=args.concurrency, rate_per_s=args.rate)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "mode": "attack",
        "fuzz": result.to_dict() | {"attacker_cpu_s": round(usage.ru_utime + usage.ru_stime, 2)},
        "t0": t0,
        "t1": time.monotonic(),
    }


async def cmd_fuzz(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="livefuse-fuzz-") as tmp:
        rig = Rig(args, Path(tmp))
        await rig.start()
        try:
            settled_s = await rig.settle(args.warmup)
            q0, before = time.monotonic(), await rig.live_counters()
            await asyncio.sleep(args.quiet)
            q1, quiet_counters = time.monotonic(), delta(await rig.live_counters(), before)
            rounds = []
            for n in range(args.rounds):
                before = await rig.live_counters()
                result, a0, a1 = await _attack(rig, args, args.requests, args.rate, args.seed + n, Path(tmp))
                rounds.append(
                    {
                        "fuzz": result,
                        "live": rig.summary(a0, a1 - 0.5),
                        "gateway_counters": delta(await rig.live_counters(), before),
                    }
                )
            quiet_spans = [(q0, q1)]
            if args.quiet_after > 0:  # the same quiet again: before and after together cancel a drift
                await asyncio.sleep(args.quiet_gap)  # the attack's own sessions are reaped meanwhile
                q2 = time.monotonic()
                await asyncio.sleep(args.quiet_after)
                quiet_spans.append((q2, time.monotonic()))
            await asyncio.sleep(1.0)
            quiet = rig.summary(q0, q1)
            after = rig.summary(*quiet_spans[1]) if len(quiet_spans) > 1 else None
            pooled = rig.probe.pooled(quiet_spans).to_dict()
            for r in rounds:
                r["change_vs_quiet"] = change_vs_quiet(r["live"], pooled)
            alive = rig.alive()
        finally:
            trend = rig.sampler.trend() if rig.sampler else {}
            code = await rig.stop()
    return {
        "mode": "fuzz",
        "args": vars(args),
        "settled_after_s": settled_s,
        "quiet": quiet,
        "quiet_after": after,
        "quiet_pooled": pooled,
        "quiet_gateway_counters": quiet_counters,
        "rounds": rounds,
        "process": trend,
        "gateway_alive_at_end": alive,
        "gateway_exit_code": code,
    }


async def cmd_soak(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="livefuse-soak-") as tmp:
        rig = Rig(args, Path(tmp))
        await rig.start()
        try:
            await asyncio.sleep(args.warmup)
            n = int(args.duration * args.rate)
            result, start, end = await _attack(rig, args, n, args.rate, args.seed, Path(tmp))
            step = max(10.0, (end - start) / 10)
            windows = []
            t = start
            while t + step <= end + 1e-6:
                windows.append({"t_s": round(t - start, 1), **rig.probe.window(t, t + step).to_dict()})
                t += step
            alive = rig.alive()
        finally:
            trend = rig.sampler.trend() if rig.sampler else {}
            code = await rig.stop()
    return {
        "mode": "soak",
        "args": vars(args),
        "fuzz": result,
        "live_windows": windows,
        "process": trend,
        "gateway_alive_at_end": alive,
        "gateway_exit_code": code,
    }


async def cmd_kill9(args: argparse.Namespace) -> dict[str, Any]:
    cycles = []
    with tempfile.TemporaryDirectory(prefix="livefuse-kill9-") as tmp:
        for _ in range(args.cycles):
            rig = Rig(args, Path(tmp))
            t0 = time.monotonic()
            await rig.start()
            ready_s = time.monotonic() - t0
            await asyncio.sleep(args.live_s)
            frames = rig.probe.frames_received
            proc = rig.gateway.proc
            assert proc is not None
            os.kill(proc.pid, signal.SIGKILL)
            await asyncio.to_thread(proc.wait)
            await rig.stop()
            cycles.append(
                {"ready_s": round(ready_s, 2), "frames_before_kill": frames, "exit": proc.returncode}
            )
    return {"mode": "kill9", "args": vars(args), "cycles": cycles}


async def cmd_cost(args: argparse.Namespace) -> dict[str, Any]:
    """What each kind of request costs the gateway: its cases one at a time, no live session, CPU charged
    per kind (bench.fuzz.cost_by_kind). SDP last: the sessions it opens keep costing until reaped."""
    if args.gateway_rate_limit is None:
        args.gateway_rate_limit = 0.0  # the handlers' own cost: no 429 in the way unless asked for
    with tempfile.TemporaryDirectory(prefix="livefuse-cost-") as tmp:
        rig = Rig(args, Path(tmp))
        await rig.gateway.start()
        try:
            assert rig.gateway.proc is not None
            cases = await _cases(args, rig.fuzz_token)
            cases.sort(key=lambda c: c.kind == "sdp")
            front_procs = fronts(rig.gateway.proc.pid)
            front = front_procs[0].pid if front_procs else None
            front0 = process_cpu_s(front) if front is not None else 0.0
            costs = await cost_by_kind(rig.gateway.url, rig.gateway.proc.pid, cases, other_pid=front)
            front_cpu = (process_cpu_s(front) - front0) if front is not None else 0.0
        finally:
            code = await rig.gateway.stop()
    return {
        "mode": "cost",
        "args": vars(args),
        "kinds": [c.to_dict() for c in costs],
        "front_cpu_s": round(front_cpu, 2),  # the front process, all kinds together (not per kind)
        "gateway_exit_code": code,
    }


def _two_cpus(text: str) -> tuple[int, int]:
    """--split-cores MEDIA,OTHER: two different CPU numbers."""
    try:
        media, other = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"two CPU numbers, MEDIA,OTHER (e.g. 0,1), got {text!r}") from None
    if media == other or min(media, other) < 0:
        raise argparse.ArgumentTypeError(f"two different CPU numbers, got {text!r}")
    return media, other


async def _cases(
    args: argparse.Namespace, token: str | None, live_session: str | None = None
) -> list[FuzzCase]:
    """This run's cases: the seeded generator (a real offer to mutate, the image bombs), the kinds asked."""
    return _pick(
        args,
        generate_cases(
            random.Random(args.seed),
            await real_offer(),
            args.requests * (8 if args.kinds else 1),
            bombs=Bombs.build(),
            live_session=live_session,
            token=token,
            max_body_bytes=MAX_BODY,
        ),
    )


def _pick(args: argparse.Namespace, cases: Iterator[FuzzCase]) -> list[FuzzCase]:
    """The first `args.requests` cases of the kinds asked for (all kinds when none were named)."""
    kinds = set(args.kinds.split(",")) if args.kinds else None
    return list(itertools.islice((c for c in cases if kinds is None or c.kind in kinds), args.requests))


def build_parser() -> argparse.ArgumentParser:
    """Every mode's options in one parser (the attacker child's own flags hidden)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["fuzz", "soak", "kill9", "attack", "cost"])
    parser.add_argument("--requests", type=int, default=2000, help="fuzz: requests per round")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument(
        "--rate", type=float, default=None, help="requests started per second (soak default 20)"
    )
    parser.add_argument("--duration", type=float, default=120.0, help="soak: seconds")
    parser.add_argument("--cycles", type=int, default=3, help="kill9: cycles")
    parser.add_argument("--live-s", type=float, default=4.0, help="kill9: seconds of live video per cycle")
    parser.add_argument("--quiet", type=float, default=15.0, help="fuzz: seconds of quiet measurement")
    parser.add_argument(
        "--quiet-after",
        type=float,
        default=None,
        help="fuzz: seconds of quiet measured again after the attack (default: --quiet; 0 = none)",
    )
    parser.add_argument("--quiet-gap", type=float, default=12.0, help="fuzz: seconds from attack to quiet")
    parser.add_argument(
        "--warmup", type=float, default=3.0, help="at least this, then until the publisher's rate holds"
    )
    parser.add_argument("--resolution", default="320x240")
    parser.add_argument("--fps", type=float, default=15.0)
    parser.add_argument("--processors", default=None, help="gateway --processors (default: its own)")
    parser.add_argument(
        "--no-source", dest="source", action="store_false", help="live session without a source"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default=None, help="only these kinds: sdp,trickle,image,raw,huge,endpoint")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument(
        "--attacker-nice",
        type=int,
        default=19,
        help="nice level of the fuzzer's process (0 = as the gateway)",
    )
    parser.add_argument(
        "--gateway-rate-limit",
        type=float,
        default=None,
        help="the gateway's --rate-limit (requests/s per address; default: its own default; 0 = off)",
    )
    parser.add_argument(
        "--no-front-process",
        action="store_true",
        help="run the gateway with --no-front-process (HTTP served by the media process itself)",
    )
    parser.add_argument(
        "--gateway-arg",
        action="append",
        help="one more argument for the gateway, e.g. --gateway-arg=--front-nice=19 (repeatable)",
    )
    parser.add_argument(
        "--decoy",
        action="store_true",
        help="control run: the same attack against a bare 404 server on this box, not the gateway (what "
        "sharing the cores with the attacker costs the live session by itself)",
    )
    parser.add_argument(
        "--split-cores",
        type=_two_cpus,
        default=None,
        metavar="MEDIA,OTHER",
        help="pin the media process and the live probe to CPU MEDIA, the front process and the attacker "
        "to CPU OTHER (e.g. 0,1): what the media process feels when the request work runs on other cores, "
        "as on a machine with cores to spare and a remote attacker",
    )
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument("--live-session", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.quiet_after is None:
        args.quiet_after = args.quiet
    if args.mode == "soak" and args.rate is None:
        args.rate = 20.0
    runner = {"fuzz": cmd_fuzz, "soak": cmd_soak, "kill9": cmd_kill9, "attack": cmd_attack, "cost": cmd_cost}[
        args.mode
    ]
    report = asyncio.run(runner(args))
    if args.mode == "attack":  # a child of fuzz/soak: its parent reports
        assert args.output is not None
        args.output.write_text(json.dumps(report, default=str))
        return 0
    report["problems"] = problems(report)
    for line in report_lines(report):
        print(line)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2, default=str))
        print(f"wrote {args.output}")
    for problem in report["problems"]:
        print(f"PROBLEM: {problem}")
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
