"""A real browser publishing to the gateway through a bottleneck: its sending rate, the uplink's queue and
loss, and the processed stream it gets back, with and without transport-cc.

Each run is a private network namespace (`unshare -n`, root) holding the gateway, headless Chromium on
/demo?autostart=1 with the carphone clip as its camera, and a tbf bottleneck per direction on `lo` (a rate
and a drop-tail queue: these kernels lack sch_netem). Every second it samples Chromium's `getStats()` and the
gateway's view of the session. `--arms` picks the gateway flags compared; `--step KBPS@S` changes a link's
rate S seconds in, and the numbers are given before and after it.

    python -m bench.browser_uplink --rate-kbps 600 --duration 40 --repeats 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import network as bench_network
from loadgen.impair import Impairment
from loadgen.percentiles import percentile

ROOT = Path(__file__).resolve().parents[1]

ARMS: dict[str, list[str]] = {
    "tcc": [],
    "remb": ["--no-transport-cc"],
    # FFmpeg's encoder reopened, with a keyframe, at each new rate (before gateway.webrtc.codecs.vp8_encoder
    # and
    # h264_encoder)
    "tcc-reopen": ["--no-live-bitrate"],
    "remb-reopen": ["--no-transport-cc", "--no-live-bitrate"],
}
STATS_JS = """(async () => {
  const out = {};
  if (typeof pc === "undefined" || !pc) return JSON.stringify(out);
  (await pc.getStats()).forEach((s) => {
    if (s.type === "outbound-rtp" && s.kind === "video") Object.assign(out, {
      bytesSent: s.bytesSent, packetsSent: s.packetsSent, targetBitrate: s.targetBitrate,
      framesEncoded: s.framesEncoded, frameWidth: s.frameWidth, frameHeight: s.frameHeight,
      qualityLimitationReason: s.qualityLimitationReason, retransmittedBytesSent: s.retransmittedBytesSent,
      nackCount: s.nackCount, pliCount: s.pliCount });
    if (s.type === "remote-inbound-rtp" && s.kind === "video") Object.assign(out, {
      remoteFractionLost: s.fractionLost, remotePacketsLost: s.packetsLost });
    if (s.type === "candidate-pair" && s.nominated && s.state === "succeeded") Object.assign(out, {
      availableOutgoingBitrate: s.availableOutgoingBitrate, pairRtt: s.currentRoundTripTime });
    if (s.type === "inbound-rtp" && s.kind === "video") Object.assign(out, {
      framesReceived: s.framesReceived, freezeCount: s.freezeCount,
      totalFreezesDuration: s.totalFreezesDuration, inPacketsLost: s.packetsLost,
      keyFramesDecoded: s.keyFramesDecoded, bytesReceived: s.bytesReceived });
  });
  return JSON.stringify(out);
})()"""


def write_y4m(source: Path, out: Path, width: int, height: int, fps: int) -> int:
    """The clip as a raw 4:2:0 Y4M file (what Chromium's fake camera reads); the number of frames."""
    import av

    frames = 0
    with av.open(str(source)) as container, out.open("wb") as f:
        f.write(f"YUV4MPEG2 W{width} H{height} F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for frame in container.decode(video=0):
            image = frame.reformat(width=width, height=height, format="yuv420p")
            f.write(b"FRAME\n")
            for plane in range(3):
                w = width if plane == 0 else width // 2
                h = height if plane == 0 else height // 2
                data = bytes(image.planes[plane])
                stride = image.planes[plane].line_size
                f.write(b"".join(data[row * stride : row * stride + w] for row in range(h)))
            frames += 1
    return frames


def tbf_change(kbps: float, queue_ms: float, shared: bool, down: bool = False) -> list[str]:
    """Change a tbf to a new rate: the uplink's (handle 10:, publisher -> gateway), the downlink's (20:,
    `down`) or the one shared link's."""
    burst = max(1600, int(kbps * 1000 / 8 / 250))  # as loadgen.impair: a jiffy's worth of bytes at HZ=250
    handle = "20:" if down and not shared else "10:"
    where = ["root"] if shared else ["parent", "1:20" if handle == "20:" else "1:10"]
    return ["tc", "qdisc", "change", "dev", "lo", *where, "handle", handle, "tbf",
            "rate", f"{kbps:g}kbit", "burst", str(burst), "latency", f"{queue_ms:g}ms"]  # fmt: skip


def link_commands(impairment: Impairment, shared: bool) -> list[list[str]]:
    """One bottleneck per direction (`bench_network.per_direction_tc`), or one tbf (handle 10:) that both
    directions share, as `bench_network.py --shaper tc` without `--per-direction`."""
    if shared:
        return [
            ["tc", "qdisc", "add", "dev", "lo", "root", "handle", "10:", *bench_network.tbf_spec(impairment)]
        ]
    return bench_network.per_direction_tc(impairment)


async def qdisc_counters() -> dict[str, dict[str, int]]:
    proc = await asyncio.create_subprocess_exec(
        "tc", "-s", "qdisc", "show", "dev", "lo", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    stdout, _ = await proc.communicate()
    return bench_network.qdisc_counters_by_handle(stdout.decode())


async def inside(
    gateway_args: list[str],
    duration_s: float,
    video: Path,
    out: Path,
    step: tuple[float, float, bool] | None,
    queue_ms: float,
    shared: bool,
    codec: str = "VP8",
) -> int:
    """In the namespace: the gateway, Chromium publishing to it, samples every second (with the uplink
    qdisc's counters), the uplink's rate stepped to `step` = (kbit/s, at second) if given."""
    from aiohttp import web

    from gateway.app import create_app, wait_started
    from gateway.cli import build_config, build_parser
    from gateway.http.keys import STATE
    from loadgen.chromium import launch
    from loadgen.embedded import start_site

    dscp = f"--media-dscp={bench_network.GATEWAY_DSCP}"
    argv = ["--host", "127.0.0.1", "--port", "0", "--ice-loopback-only", dscp]
    app = create_app(build_config(build_parser().parse_args([*argv, *gateway_args])))
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    port = await start_site(runner)
    result: dict[str, Any] = {"gateway_args": gateway_args, "samples": []}
    try:
        await wait_started(app, 60)
        url = f"http://127.0.0.1:{port}/demo?autostart=1&codec={codec}"
        async with launch(url, extra_flags=(f"--use-file-for-fake-video-capture={video}",)) as browser:
            page = browser.page
            t0 = time.monotonic()
            stepped = step is None
            while time.monotonic() - t0 < duration_s:
                await asyncio.sleep(1.0)
                if not stepped and step is not None and time.monotonic() - t0 >= step[1]:
                    subprocess.run(tbf_change(step[0], queue_ms, shared, step[2]), check=True)
                    stepped = True
                    result["stepped_at_s"] = round(time.monotonic() - t0, 2)
                browser_stats = json.loads(await page.evaluate(STATS_JS) or "{}")
                manager = app[STATE].sessions
                sessions = list(manager.sessions.values()) if manager is not None else []
                summary = sessions[0].summary() if sessions else {}
                counters = await qdisc_counters()
                result["samples"].append({
                    "t_s": round(time.monotonic() - t0, 2),
                    "browser": browser_stats,
                    "frames_in": summary.get("frames_in"),
                    "uplink": summary.get("uplink"),
                    "transport_cc": summary.get("transport_cc"),
                    "receive_recovery": summary.get("receive_recovery"),
                    "send_bitrate": summary.get("send_bitrate"),
                    "transport_cc_send": summary.get("transport_cc_send"),
                    "retransmits": summary.get("retransmits"),
                    **{f"{name}_qdisc": counters.get(handle, {}) for handle, name in
                       (("10:", "uplink"), ("20:", "downlink"))},
                })  # fmt: skip
    except Exception as exc:  # noqa: BLE001  (reported in the result, the outer process prints it)
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        await runner.cleanup()
        tc = subprocess.run(["tc", "-s", "qdisc", "show", "dev", "lo"], capture_output=True, text=True)
        counters = bench_network.qdisc_counters_by_handle(tc.stdout)
        directions = {"10:": "shared"} if shared else bench_network.DIRECTIONS
        result["qdisc"] = {directions[h]: c for h, c in counters.items() if h in directions}
    out.write_text(json.dumps(result))
    return 0 if "error" not in result else 1


def _median(values: list[float]) -> float | None:
    return round(percentile(values, 50), 1) if values else None


def _p95(values: list[float]) -> float | None:
    return round(percentile(values, 95), 1) if values else None


def window(samples: list[dict[str, Any]], start_s: float, end_s: float) -> dict[str, Any]:
    """Numbers over the samples in [start_s, end_s): rates from consecutive samples' counters."""
    inside_window = [s for s in samples if start_s <= s["t_s"] < end_s]
    send_kbps, fps, dropped, passed, down_dropped, down_passed = [], [], 0, 0, 0, 0
    for a, b in zip(inside_window, inside_window[1:], strict=False):
        dt = b["t_s"] - a["t_s"]
        ba, bb = a["browser"], b["browser"]
        if dt > 0 and "bytesSent" in ba and "bytesSent" in bb:
            send_kbps.append((bb["bytesSent"] - ba["bytesSent"]) * 8 / dt / 1000)
        if dt > 0 and a.get("frames_in") is not None and b.get("frames_in") is not None:
            fps.append((b["frames_in"] - a["frames_in"]) / dt)
        qa, qb = a.get("uplink_qdisc") or {}, b.get("uplink_qdisc") or {}
        if qa and qb:
            dropped += qb["dropped"] - qa["dropped"]
            passed += qb["packets"] - qa["packets"]
        da, db = a.get("downlink_qdisc") or {}, b.get("downlink_qdisc") or {}
        if da and db:
            down_dropped += db["dropped"] - da["dropped"]
            down_passed += db["packets"] - da["packets"]
    browser = [s["browser"] for s in inside_window]
    windows = [(s.get("uplink") or {}).get("last_window") or {} for s in inside_window]
    queue_ms = [w["queue_ms"] for w in windows if w.get("queue_ms") is not None]
    rtt_ms = [b["pairRtt"] * 1000 for b in browser if b.get("pairRtt") is not None]
    first, last = (browser[0], browser[-1]) if browser else ({}, {})

    def delta(key: str) -> float:
        return float((last.get(key) or 0) - (first.get(key) or 0))

    return {
        "seconds": round(inside_window[-1]["t_s"] - inside_window[0]["t_s"], 1) if inside_window else 0,
        "browser_send_kbps_p50": _median(send_kbps),
        "browser_target_kbps_p50": _median(
            [b["targetBitrate"] / 1000 for b in browser if b.get("targetBitrate")]
        ),
        "browser_estimate_kbps_p50": _median(
            [b["availableOutgoingBitrate"] / 1000 for b in browser if b.get("availableOutgoingBitrate")]
        ),
        "pair_rtt_ms_p50": _median(rtt_ms),
        "pair_rtt_ms_p95": _p95(rtt_ms),
        "uplink_queue_ms_p50": _median(queue_ms),
        "uplink_queue_ms_p95": _p95(queue_ms),
        "uplink_dropped_pct": round(100 * dropped / max(dropped + passed, 1), 2),
        "downlink_dropped_pct": round(100 * down_dropped / max(down_dropped + down_passed, 1), 2),
        "gateway_target_kbps_p50": _median(
            [t / 1000 for s in inside_window for t in [_target(s)] if t is not None]
        ),
        "gateway_fps_p50": _median(fps),
        "gateway_fps_min": round(min(fps), 1) if fps else None,
        "sent_width": last.get("frameWidth"),
        "quality_limitation": sorted({b.get("qualityLimitationReason") for b in browser} - {None}),
        "nacks": delta("nackCount"),
        "plis": delta("pliCount"),
        "retransmitted_kbytes": round(delta("retransmittedBytesSent") / 1000, 1),
        "processed_freezes": delta("freezeCount"),
        "processed_frozen_s": round(delta("totalFreezesDuration"), 2),
        "processed_frames": delta("framesReceived"),
        "processed_keyframes": delta("keyFramesDecoded"),
        "downlink_dropped_packets": down_dropped,
    }


def longest_outage(samples: list[dict[str, Any]], step_s: float, fraction: float = 0.8) -> float:
    """After the step, the longest run of one-second samples in which the browser received less than
    `fraction` of the frame rate it received before the step: how long the picture was broken at once."""
    rates = []
    for a, b in zip(samples, samples[1:], strict=False):
        dt = b["t_s"] - a["t_s"]
        got = (b["browser"].get("framesReceived") or 0) - (a["browser"].get("framesReceived") or 0)
        if dt > 0:
            rates.append((a["t_s"], b["t_s"], got / dt))
    before = [fps for start, _, fps in rates if start < step_s]
    if not before:
        return 0.0
    wanted = fraction * statistics.median(before)
    longest, run_start = 0.0, None
    for start, end, fps in rates:
        if end <= step_s:
            continue
        if fps < wanted:
            run_start = start if run_start is None else run_start
            longest = max(longest, end - run_start)
        else:
            run_start = None
    return round(longest, 1)


def _target(sample: dict[str, Any]) -> float | None:
    """The gateway's target in one sample (the processed stream's one encoder, VP8 or H.264)."""
    encoders = sample.get("send_bitrate") or {}
    send = encoders.get("VP8") or encoders.get("H264") or {}
    target = send.get("target_bps")
    return float(target) if target is not None else None


def summarise(result: dict[str, Any], warmup_s: float) -> dict[str, Any]:
    """One run: a window from `warmup_s` to the step (or the end), and one from the step to the end."""
    samples = [s for s in result.get("samples", []) if s.get("browser")]
    stepped = result.get("stepped_at_s")
    end = float("inf")
    windows = {"before": window(samples, warmup_s, stepped if stepped is not None else end)}
    if stepped is not None:
        windows["after"] = window(samples, stepped, end)
        windows["after"]["processed_outage_s"] = longest_outage(samples, stepped)
    return {
        "gateway_args": result.get("gateway_args"),
        "error": result.get("error"),
        "stepped_at_s": stepped,
        **windows,
        "uplink_qdisc": (result.get("qdisc") or {}).get("publisher_to_gateway")
        or (result.get("qdisc") or {}).get("shared"),
        "downlink_qdisc": (result.get("qdisc") or {}).get("gateway_to_publisher"),
        "transport_cc": (samples[-1].get("transport_cc") if samples else None),
    }


def run_arm(arm: str, args: argparse.Namespace, video: Path, work: Path, index: int) -> dict[str, Any]:
    impairment = Impairment("browser", rate_kbps=args.rate_kbps, queue_ms=args.queue_ms)
    out = work / f"{arm}-{index}.json"
    step = (f"{args.step_link}:" if args.step_link == "down" else "") + args.step if args.step else "none"
    command = [sys.executable, "-m", "bench.browser_uplink", "--inside", str(out), str(args.duration),
               str(video), step, str(args.queue_ms), "shared" if args.shared else "split", args.codec, "--",
               *ARMS[arm]]  # fmt: skip
    tc = " && ".join(shlex.join(c) for c in link_commands(impairment, args.shared))
    script = f"{bench_network.LO_UP} && {tc} && exec {shlex.join(command)}"
    done = subprocess.run(
        [*bench_network.namespace_prefix(), "sh", "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=args.duration + 150,
    )
    if not out.exists():
        return {"arm": arm, "error": (done.stderr or done.stdout)[-800:]}
    raw = json.loads(out.read_text())
    return {"arm": arm, "run": index, **summarise(raw, args.warmup), "samples": raw.get("samples")}


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| arm | run | window | browser sends (kbit/s) | its estimate | uplink queue p50 / p95 "
        "| pair RTT p50 / p95 | uplink dropped | gateway fps p50 / min | NACKs | processed freezes (s) "
        "| gateway sends (target kbit/s) | downlink dropped | keyframes received | longest outage (s) |"
    )
    lines = [head, "|" + "---|" * 15]
    for r in rows:
        if r.get("error") and not r.get("before"):
            lines.append(f"| {r['arm']} | {r.get('run')} | error: {str(r['error'])[:80]} |")
            continue
        for name in ("before", "after"):
            w = r.get(name)
            if not w:
                continue
            lines.append(
                f"| {r['arm']} | {r['run']} | {name} | {w['browser_send_kbps_p50']} "
                f"| {w['browser_estimate_kbps_p50']} "
                f"| {w['uplink_queue_ms_p50']} / {w['uplink_queue_ms_p95']} ms "
                f"| {w['pair_rtt_ms_p50']} / {w['pair_rtt_ms_p95']} ms | {w['uplink_dropped_pct']} % "
                f"| {w['gateway_fps_p50']} / {w['gateway_fps_min']} | {w['nacks']:g} "
                f"| {w['processed_freezes']:g} ({w['processed_frozen_s']}) "
                f"| {w['gateway_target_kbps_p50']} | {w['downlink_dropped_pct']} % "
                f"| {w.get('processed_keyframes', 0):g} | {w.get('processed_outage_s', '')} |"
            )
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--inside":
        out, duration, y4m, step, queue_ms, link, codec = sys.argv[2:9]
        rest = sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else []
        down = step.startswith("down:")
        rate, _, at = step.removeprefix("down:").partition("@")
        change = None if step == "none" else (float(rate), float(at), down)
        return asyncio.run(
            inside(
                rest, float(duration), Path(y4m), Path(out), change, float(queue_ms), link == "shared", codec
            )
        )
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--rate-kbps", type=float, default=600.0, help="each direction's bottleneck")
    parser.add_argument("--queue-ms", type=float, default=200.0, help="each direction's tbf queue")
    parser.add_argument("--duration", type=float, default=40.0, help="seconds sampled per run")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds left out of the summary")
    parser.add_argument(
        "--step",
        help="KBPS@SECONDS: change the uplink's rate to KBPS that far into the run "
        "(the after window), e.g. 400@20",
    )
    parser.add_argument(
        "--step-link",
        choices=("up", "down"),
        default="up",
        help="which direction --step changes (down: the processed stream to the browser)",
    )
    parser.add_argument(
        "--shared",
        action="store_true",
        help="one tbf that both directions share (the uplink columns then count that link)",
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--codec",
        choices=("VP8", "H264"),
        default="VP8",
        help="the only video codec Chromium offers (/demo?codec=), so both directions use it",
    )
    parser.add_argument("--arms", default="tcc,remb", help=f"comma-separated, of {sorted(ARMS)}")
    parser.add_argument(
        "--output", type=Path, help="write the JSON report here (default: none, printed only)"
    )
    args = parser.parse_args()
    arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        parser.error(f"unknown arm(s) {unknown}; known: {sorted(ARMS)}")
    from loadgen.chromium import CHROMIUM
    from loadgen.media import default_media_dir, media_path

    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    qdiscs = bench_network.probe_qdiscs()
    if qdiscs.get("tbf") is not None:
        print(f"the kernel has no tbf: {qdiscs['tbf']}", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        video = work / "carphone_640x360.y4m"
        write_y4m(media_path(default_media_dir(os.environ), "carphone_pristine.mp4"), video, 640, 360, 15)
        for index in range(args.repeats):
            for arm in arms:
                row = run_arm(arm, args, video, work, index + 1)
                rows.append(row)
                print("\n".join(table([row]).splitlines()[2:]), flush=True)
    settings = {"rate_kbps": args.rate_kbps, "queue_ms": args.queue_ms, "step": args.step,
                "step_link": args.step_link,
                "shared": args.shared, "duration_s": args.duration, "warmup_s": args.warmup}  # fmt: skip
    print(table(rows))
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({**settings, "runs": rows}, indent=1))
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
