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
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from bench.fuzz import (
    Bombs,
    FuzzCase,
    LiveProbe,
    ProcessSampler,
    cost_by_kind,
    generate_cases,
    process_cpu_s,
    real_offer,
    run_fuzz,
    runqueue_wait_s,
)
from gateway.webrtc.internals import sender_encoder
from gateway.webrtc.recovery.jitter_buffer import recovery_counters
from loadgen.arguments import parse_resolution
from loadgen.client import ClientConfig, WhipJob, upload_source
from loadgen.embedded import EmbeddedGateway, EmbeddedGatewayConfig, free_port
from loadgen.media import default_media_dir, media_path
from loadgen.synth import SynthConfig, build_loop

ROOT = Path(__file__).resolve().parents[1]

MAX_BODY = 8 * 1024 * 1024


def _tenants_file(directory: Path) -> tuple[Path, str, str]:
    live, fuzz = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    path = directory / "tenants.toml"
    path.write_text(f'[tenants.live]\ntoken = "{live}"\n[tenants.fuzz]\ntoken = "{fuzz}"\nmax_sessions = 8\n')
    return path, live, fuzz


class Rig:
    """A gateway subprocess, the live publisher and the process sampler."""

    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args = args
        tenants, self.live_token, self.fuzz_token = _tenants_file(tmp)
        extra: tuple[str, ...] = (
            "--tenants-file",
            str(tenants),
            "--max-sessions",
            "16",
            "--log-level",
            "warning",
        )
        if args.gateway_rate_limit is not None:  # else the gateway's default per-address limit
            extra += ("--rate-limit", str(args.gateway_rate_limit))
        if args.no_front_process:  # A/B: HTTP on the media process's own event loop, as before gateway.front
            extra += ("--no-front-process",)
        if args.split_cores and not args.no_front_process:
            extra += (f"--front-cpus={args.split_cores[1]}",)
        extra += tuple(args.gateway_arg or ())
        self.gateway = EmbeddedGateway(
            EmbeddedGatewayConfig(processors=args.processors, extra_args=extra, log_level="warning")
        )
        self.probe = LiveProbe()
        self.job: WhipJob | None = None
        self.sampler: ProcessSampler | None = None
        self.http: aiohttp.ClientSession | None = None
        self.uplink_bps: list[tuple[float, int]] = []  # the publisher's VP8 target (aiortc follows our REMB)
        self._uplink_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.gateway.start()
        assert self.gateway.proc is not None
        if self.args.split_cores:  # the media process and the probe on one core, the rest on the other
            media_cpu, other_cpu = self.args.split_cores
            _pin(os.getpid(), {media_cpu})
            _pin(self.gateway.proc.pid, {media_cpu})  # its front process runs on `--front-cpus`
            for front in _fronts(self.gateway.proc.pid):
                if os.sched_getaffinity(front.pid) != {other_cpu}:
                    raise RuntimeError(f"the front process is not on CPU {other_cpu}, as --front-cpus asked")
        self.sampler = ProcessSampler(self.gateway.proc.pid, period_s=1.0)
        self.sampler.start()
        self.http = aiohttp.ClientSession()
        config = ClientConfig(url=self.gateway.url, token=self.live_token, loopback_only=True)
        media = default_media_dir(os.environ)
        if self.args.source:
            sid = await upload_source(self.http, config, media_path(media, "astronaut.png"))
            config = ClientConfig(
                url=self.gateway.url, token=self.live_token, loopback_only=True, source_id=sid
            )
        w, h = parse_resolution(self.args.resolution)
        loop = build_loop(SynthConfig(w, h, self.args.fps), media)
        self.job = WhipJob(1, config, loop, self.args.fps, self.probe.emit, self.http)
        await self.job.start()
        self._uplink_task = asyncio.ensure_future(self._sample_uplink())

    async def _sample_uplink(self) -> None:
        """Every 0.25 s: the live publisher's encoder target (aiortc sets it from the gateway's REMB)."""
        while True:
            pc = self.job._pc if self.job is not None else None  # noqa: SLF001
            for sender in pc.getSenders() if pc is not None else []:
                encoder = sender_encoder(sender)
                if sender.track is not None and sender.track.kind == "video" and encoder is not None:
                    self.uplink_bps.append((time.monotonic(), int(getattr(encoder, "target_bitrate", 0))))
            await asyncio.sleep(0.25)

    def uplink_window(self, t0: float, t1: float) -> dict[str, int] | None:
        """The publisher's encoder target over [t0, t1): min / median / max, kbit/s."""
        values = sorted(bps for t, bps in self.uplink_bps if t0 <= t < t1 and bps)
        if not values:
            return None
        middle = values[len(values) // 2]
        return {"min": values[0] // 1000, "median": middle // 1000, "max": values[-1] // 1000}

    def summary(self, t0: float, t1: float) -> dict[str, Any]:
        """The live session over [t0, t1), with the publisher's encoder target meanwhile."""
        return self.probe.window(t0, t1).to_dict() | {"uplink_target_kbps": self.uplink_window(t0, t1)}

    async def settle(self, warmup_s: float, steady_s: float = 3.0, max_s: float = 30.0) -> float:
        """Wait `warmup_s`, then until the publisher's encoder target has held within 5 % for `steady_s`
        (its rate climbs for the first seconds; a window taken during the climb carries smaller frames than
        one taken later). Returns the seconds waited; at most `max_s`."""
        start = time.monotonic()
        await asyncio.sleep(warmup_s)
        while (waited := time.monotonic() - start) < max_s:
            now = time.monotonic()
            recent = [bps for t, bps in self.uplink_bps if t >= now - steady_s and bps]
            if waited >= warmup_s + steady_s and recent and max(recent) <= 1.05 * min(recent):
                break
            await asyncio.sleep(0.25)
        return round(time.monotonic() - start, 1)

    @property
    def live_session(self) -> str | None:
        location = self.job._location if self.job is not None else None  # noqa: SLF001
        return location.rsplit("/", 1)[-1] if location else None

    async def stop(self) -> int | None:
        if self._uplink_task is not None:
            self._uplink_task.cancel()
        if self.job is not None:
            await self.job.stop()
        if self.sampler is not None:
            await self.sampler.stop()
        if self.http is not None:
            await self.http.close()
        return await self.gateway.stop()

    async def live_counters(self) -> dict[str, Any]:
        """The gateway's view of the live session (frames in/out, drops by outcome, RTP recovery): where the
        frames the probe misses were lost. Empty when the session cannot be read."""
        sid = self.live_session
        if sid is None or self.http is None:
            return {}
        info: dict[str, Any] = {}
        for _ in range(10):  # the probe shares 127.0.0.1 with the attacker: wait out a 429
            try:
                async with self.http.get(
                    f"{self.gateway.url}/sessions/{sid}",
                    headers={"Authorization": f"Bearer {self.live_token}"},
                    timeout=aiohttp.ClientTimeout(total=10),
                ) as r:
                    if r.status == 429:
                        await asyncio.sleep(float(r.headers.get("Retry-After", "1")))
                        continue
                    info = await r.json() if r.status == 200 else {}
                    break
            except (aiohttp.ClientError, TimeoutError, ValueError):
                return {}
        keys = ("frames_in", "frames_out", "drops", "receive_recovery")
        out = {k: info[k] for k in keys if k in info}
        bitrate = (info.get("send_bitrate") or {}).get("VP8") or {}
        out["encoder_restarts"] = bitrate.get(
            "changes"
        )  # each bitrate change opens a new context: a keyframe
        pc = self.job._pc if self.job is not None else None  # noqa: SLF001
        receiver = (
            next((r for r in pc.getReceivers() if r.track and r.track.kind == "video"), None) if pc else None
        )
        out["client_receive_recovery"] = recovery_counters(receiver) if receiver is not None else None
        job = self.probe.stats._jobs.get(1)  # noqa: SLF001
        out["client_unreadable"] = len(job.unreadable) if job is not None else 0
        out["client_repeats"] = len(job.repeats) if job is not None else 0
        try:
            async with self.http.get(
                f"{self.gateway.url}/api/stats", timeout=aiohttp.ClientTimeout(total=10)
            ) as r:
                stats = await r.json() if r.status == 200 else {}
            out["loop_lag_ms_last_window"] = (stats.get("system") or {}).get("loop_lag_ms")
        except (aiohttp.ClientError, TimeoutError, ValueError):
            pass
        if self.gateway.proc is not None:
            out["gateway_cpu_s"] = process_cpu_s(self.gateway.proc.pid)  # the media process
            out["front_cpu_s"] = _front_cpu_s(self.gateway.proc.pid)
            # time the media process's threads waited for a CPU
            out["gateway_runqueue_wait_s"] = runqueue_wait_s(self.gateway.proc.pid)
        out["probe_process_cpu_s"] = time.process_time()  # the live client's own process
        out["probe_runqueue_wait_s"] = runqueue_wait_s(os.getpid())
        return out

    def alive(self) -> bool:
        return self.gateway.proc is not None and self.gateway.proc.poll() is None


DECOY = """
import logging, sys
from aiohttp import web
from gateway.http.access_log import MalformedRequestFilter
logging.getLogger("aiohttp.server").addFilter(MalformedRequestFilter())  # as the gateway: no tracebacks
async def anything(request):
    return web.Response(status=404, text="decoy\\n")
app = web.Application(client_max_size=2**30)
app.router.add_route("*", "/{tail:.*}", anything)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""


async def _start_decoy(cpus: set[int] | None) -> tuple[asyncio.subprocess.Process, str]:
    """A bare aiohttp server that answers 404 to everything: the control run's target. The attacker, its
    traffic and a server parsing it load the same two cores; only the gateway's own work is missing.
    `cpus`: where it runs (with --split-cores, where the front process would)."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", DECOY, str(port), cwd=str(ROOT),
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )  # fmt: skip
    for _ in range(100):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            await asyncio.sleep(0.1)
    proc.kill()
    raise RuntimeError("the decoy server did not start")


async def _attack(
    rig: Rig, args: argparse.Namespace, requests: int, rate: float | None, seed: int, tmp: Path
) -> tuple[dict[str, Any], float, float]:
    """Run the fuzzer in a child process at `--attacker-nice` (a real attacker is on another machine: here it
    must not take the CPU the gateway and the live probe need). Returns its result and its attack window."""
    out = tmp / f"attack-{seed}.json"
    cpus = {args.split_cores[1]} if args.split_cores else None
    decoy = await _start_decoy(cpus) if args.decoy else None
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
    setup = (lambda: _attacker_setup(nice, cpus)) if nice or cpus else None
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
            q1, quiet_counters = time.monotonic(), _delta(await rig.live_counters(), before)
            rounds = []
            for n in range(args.rounds):
                before = await rig.live_counters()
                result, a0, a1 = await _attack(rig, args, args.requests, args.rate, args.seed + n, Path(tmp))
                rounds.append(
                    {
                        "fuzz": result,
                        "live": rig.summary(a0, a1 - 0.5),
                        "gateway_counters": _delta(await rig.live_counters(), before),
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
                r["change_vs_quiet"] = _change(r["live"], pooled)
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


def _change(attacked: dict[str, Any], quiet: dict[str, Any]) -> dict[str, float | None]:
    """fps, p50 and p95 during the attack against the quiet windows, in per cent (+ = higher)."""
    out: dict[str, float | None] = {}
    for key in ("fps", "p50_ms", "p95_ms"):
        a, q = attacked.get(key), quiet.get(key)
        out[key] = round(100.0 * (a - q) / q, 1) if a is not None and q else None
    return out


def _delta(after: Any, before: Any) -> Any:
    """after - before, key by key, for nested dicts of counters (what a window added)."""
    if isinstance(after, dict):
        base = before if isinstance(before, dict) else {}
        return {k: v if k.startswith("loop_lag") else _delta(v, base.get(k)) for k, v in after.items()}
    if isinstance(after, int | float) and not isinstance(after, bool):
        return after - (before if isinstance(before, int | float) else 0)
    return after


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
            fronts = _fronts(rig.gateway.proc.pid)
            front = fronts[0].pid if fronts else None
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


def _front_part(kind: dict[str, Any]) -> str:
    other = kind.get("other_cpu_ms_per_request")
    return "" if other is None else f" (+ front process {other:.2f})"


def _two_cpus(text: str) -> tuple[int, int]:
    """--split-cores MEDIA,OTHER: two different CPU numbers."""
    try:
        media, other = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"two CPU numbers, MEDIA,OTHER (e.g. 0,1), got {text!r}") from None
    if media == other or min(media, other) < 0:
        raise argparse.ArgumentTypeError(f"two different CPU numbers, got {text!r}")
    return media, other


def _pin(pid: int, cpus: set[int]) -> None:
    """Every thread of `pid` on `cpus` (threads made later inherit their creator's)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except (ProcessLookupError, FileNotFoundError):
            continue


def _attacker_setup(nice: int, cpus: set[int] | None) -> None:
    if nice:
        os.nice(nice)
    if cpus:
        os.sched_setaffinity(0, cpus)


def _fronts(gateway_pid: int) -> list[psutil.Process]:
    """The gateway's front process (gateway.front), when it has one."""
    children = psutil.Process(gateway_pid).children()
    return [child for child in children if "gateway.front" in " ".join(child.cmdline())]


def _front_cpu_s(gateway_pid: int) -> float:
    """CPU seconds of the gateway's front process so far; 0 without one."""
    return sum(process_cpu_s(child.pid) for child in _fronts(gateway_pid))


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


def _verdict(report: dict[str, Any]) -> list[str]:
    problems = []
    fuzz_results = [r["fuzz"] for r in report.get("rounds", [])] + (
        [report["fuzz"]] if "fuzz" in report else []
    )
    for r in fuzz_results:
        if r["five_xx"]:
            problems.append(f"{r['five_xx']} server errors: {r['server_errors'][:3]}")
    if report.get("gateway_alive_at_end") is False:
        problems.append("the gateway died")
    for c in report.get("cycles", []):
        if c["frames_before_kill"] == 0:
            problems.append("a restarted gateway carried no live frames")
    return problems


def _print(report: dict[str, Any]) -> None:
    def live(w: dict[str, Any]) -> str:
        return (
            f"fps {w['fps']:.1f}  p50 {w['p50_ms'] or float('nan'):.1f} ms"
            f"  p95 {w['p95_ms'] or float('nan'):.1f} ms  loss {100 * w['loss']:.1f} %"
            f"  ({w['received']}/{w['sent']}; of the rest {w.get('unreadable', 0)} came back unreadable,"
            f" {w.get('missing', 0)} never came back; publisher's encoder target kbit/s"
            f" {w.get('uplink_target_kbps')})"
        )

    if report["mode"] == "fuzz":
        print(f"settled    : the publisher's rate held steady after {report['settled_after_s']} s")
        print(f"quiet      : {live(report['quiet'])}")
        if report.get("quiet_after"):
            print(f"quiet after: {live(report['quiet_after'])}")
            print(f"quiet, both: {live(report['quiet_pooled'])}")
        for i, r in enumerate(report["rounds"], 1):
            f = r["fuzz"]
            print(
                f"round {i}    : {f['requests']} requests in {f['duration_s']} s, 5xx {f['five_xx']}, "
                f"statuses {f['statuses']}, transport {f['transport_errors']}, "
                f"attacker CPU {f.get('attacker_cpu_s')} s"
            )
            print(f"  attacked : {live(r['live'])}")
            c = r["change_vs_quiet"]
            print(f"  change   : fps {c['fps']:+} %  p50 {c['p50_ms']:+} %  p95 {c['p95_ms']:+} %")
            print(f"  gateway  : quiet {report.get('quiet_gateway_counters')}")
            print(f"             attacked {r.get('gateway_counters')}")
    elif report["mode"] == "soak":
        f = report["fuzz"]
        print(
            f"soak       : {f['requests']} requests in {f['duration_s']} s, 5xx {f['five_xx']}, "
            f"statuses {f['statuses']}"
        )
        for w in report["live_windows"]:
            print(f"  t={w['t_s']:>6}s {live(w)}")
    elif report["mode"] == "cost":
        for k in report["kinds"]:
            print(
                f"{k['kind']:9}: {k['requests']:5} requests, gateway CPU "
                f"{k['cpu_ms_per_request']:6.2f} ms/request{_front_part(k)}, "
                f"answer p50 {k['wall_ms_p50']:.1f} ms "
                f"max {k['wall_ms_max']:.0f} ms, after {k['after_cpu_pct']:.0f} % CPU; "
                f"by status {k['cpu_ms_by_status']}; costliest {k['cpu_ms_top']}"
            )
    else:
        for i, c in enumerate(report["cycles"], 1):
            print(
                f"kill -9 cycle {i}: ready in {c['ready_s']} s, {c['frames_before_kill']} live frames, "
                f"exit {c['exit']}"
            )
    proc = report.get("process") or {}
    for name in ("rss_bytes", "fds", "threads"):
        if name in proc:
            p = proc[name]
            print(f"{name:10} : start {p['start']}  end {p['end']}  max {p['max']}  per min {p['per_min']}")


def main(argv: list[str] | None = None) -> int:
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
    args = parser.parse_args(argv)
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
    report["problems"] = _verdict(report)
    _print(report)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2, default=str))
        print(f"wrote {args.output}")
    for problem in report["problems"]:
        print(f"PROBLEM: {problem}")
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
