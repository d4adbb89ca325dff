"""The fuzz rig's moving parts: a gateway subprocess on loopback with a live tenant and an attacker tenant,
one real WHIP publisher on it (watched by bench.probes), and the decoy server of a control run.

Apart from the modes (bench.fuzz_gateway) so that every mode starts and stops the same gateway the same way;
none of this prints or exits.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from bench.probes import LiveProbe, ProcessSampler, process_cpu_s, runqueue_wait_s
from gateway.webrtc.compat import sender_encoder
from gateway.webrtc.recovery.jitter_buffer import recovery_counters
from loadgen.arguments import parse_resolution
from loadgen.client import ClientConfig, WhipJob, upload_source
from loadgen.embedded import EmbeddedGateway, EmbeddedGatewayConfig, free_port
from loadgen.media import default_media_dir, media_path
from loadgen.synth import SynthConfig, build_loop

ROOT = Path(__file__).resolve().parents[1]


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
            pin(os.getpid(), {media_cpu})
            pin(self.gateway.proc.pid, {media_cpu})  # its front process runs on `--front-cpus`
            for front in fronts(self.gateway.proc.pid):
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
            out["front_cpu_s"] = front_cpu_s(self.gateway.proc.pid)
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


async def start_decoy(cpus: set[int] | None) -> tuple[asyncio.subprocess.Process, str]:
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


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of `pid` on `cpus` (threads made later inherit their creator's)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except (ProcessLookupError, FileNotFoundError):
            continue


def attacker_setup(nice: int, cpus: set[int] | None) -> None:
    if nice:
        os.nice(nice)
    if cpus:
        os.sched_setaffinity(0, cpus)


def fronts(gateway_pid: int) -> list[psutil.Process]:
    """The gateway's front process (gateway.front), when it has one."""
    children = psutil.Process(gateway_pid).children()
    return [child for child in children if "gateway.front" in " ".join(child.cmdline())]


def front_cpu_s(gateway_pid: int) -> float:
    """CPU seconds of the gateway's front process so far; 0 without one."""
    return sum(process_cpu_s(child.pid) for child in fronts(gateway_pid))
