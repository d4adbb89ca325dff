"""The options of `loadgen run` and `loadgen capacity`, declared once and shared by both subcommands.

Each `add_*` function adds one group of options and returns the actions it added (argparse's public return
value), so a test can check every option's help without reaching into the parser.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from loadgen.arguments import parse_resolution
from loadgen.impair import PROFILES, Impairment, parse_impairment
from loadgen.synth import TEST_CASES

Actions = list[argparse.Action]


def help_with_default(action: argparse.Action) -> str | None:
    """The action's help with its default appended, unless the help already says it (or there is none)."""
    text = action.help
    if text is None or text == argparse.SUPPRESS:
        return text
    if "default" in text or not action.option_strings or action.default in (None, False, argparse.SUPPRESS):
        return text
    default = action.default
    if isinstance(default, tuple) and len(default) == 2:  # a resolution
        default = "x".join(map(str, default))
    elif isinstance(default, list):
        default = ",".join(map(str, default))
    return f"{text} (default {default})"


def show_defaults(actions: Actions) -> Actions:
    """Every option's default in its help line (through `Action.help`, argparse's public attribute)."""
    for action in actions:
        action.help = help_with_default(action)
    return actions


def parse_test_cases(text: str) -> list[str]:
    cases = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in cases if c not in TEST_CASES]
    if bad or not cases:
        raise argparse.ArgumentTypeError(f"test cases must be among {', '.join(TEST_CASES)}; got {text!r}")
    return cases


def parse_network(spec: str) -> Impairment:
    try:
        return parse_impairment(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_output_options(p: argparse.ArgumentParser) -> Actions:
    out = [
        p.add_argument("--output", metavar="FILE.json", type=Path, help="JSON report path"),
        p.add_argument("--csv", metavar="FILE.csv", type=Path, help="per-frame samples CSV path"),
        p.add_argument("--html", metavar="FILE.html", type=Path, help="HTML report with charts"),
        p.add_argument("--no-live", action="store_true", help="no live table (e.g. in CI logs)"),
    ]
    p.add_argument("--output-report", dest="output", type=Path, help=argparse.SUPPRESS)
    return out


def add_gateway_options(p: argparse.ArgumentParser) -> Actions:
    return [
        p.add_argument(
            "--url", help="gateway base URL; without it an embedded gateway is started on 127.0.0.1"
        ),
        p.add_argument("--token", help="bearer token for the gateway (also passed to an embedded one)"),
        p.add_argument("--engine", help="embedded gateway: --engine"),
        p.add_argument("--providers", help="embedded gateway: --providers"),
        p.add_argument("--processors", help="embedded gateway: --processors"),
        p.add_argument("--gateway-log-level", default="warning", help="embedded gateway: --log-level"),
        p.add_argument(
            "--batch-sizes",
            metavar="N",
            type=int,
            nargs="+",
            help="sweep: embedded gateway --max-batch values (remote: observed, reported)",
        ),
    ]


def add_stream_options(p: argparse.ArgumentParser) -> Actions:
    """What each job sends and how: size, rate, tracks, codec, the network between."""
    return [
        p.add_argument(
            "--resolution",
            metavar="WxH",
            type=parse_resolution,
            default=(640, 360),
            help="WxH (default 640x360)",
        ),
        p.add_argument(
            "--resolutions",
            metavar="WxH",
            type=parse_resolution,
            nargs="+",
            help="sweep: several resolutions",
        ),
        p.add_argument(
            "--fps", metavar="FPS", type=float, default=15.0, help="frames per second per job (default 15)"
        ),
        p.add_argument(
            "--audio",
            action="store_true",
            help="each job also sends Opus (a click a second) and a WHEP viewer per job measures the "
            "A/V offset the gateway's sender reports give (report: jobs[].av_offset_ms)",
        ),
        p.add_argument(
            "--transport-cc",
            action="store_true",
            help="offer transport-cc and return its feedback for the processed stream, as a browser "
            "does (the gateway's sender then reads per-packet arrivals, not receiver reports "
            "alone)",
        ),
        p.add_argument(
            "--codec",
            choices=("VP8", "H264"),
            default=None,
            help="offer only this video codec (as e.g. OBS offers H.264 only); the gateway returns "
            "the processed stream in it (default: aiortc's list, VP8 first)",
        ),
        p.add_argument(
            "--publisher-denoiser",
            type=int,
            choices=range(0, 7),
            default=0,
            metavar="0..6",
            help="libvpx's temporal denoiser in each publisher's VP8 encoder: 0 (default) off, so "
            "frame stamps measure the gateway alone; 4 is what aiortc and libwebrtc on x86 send, "
            "and it leaves stale blocks in 2-4 %% of the stamps",
        ),
        p.add_argument(
            "--picture-quality",
            action="store_true",
            help="measure each returned frame's fidelity to the one sent: PSNR of the median 16x16 "
            "block's luma error, so the swapped face does not count (report: picture_psnr_db)",
        ),
        p.add_argument(
            "--network",
            metavar="PROFILE|SPEC",
            type=parse_network,
            help="impair each job's link, both directions: a profile "
            f"({', '.join(PROFILES)}) or delay=MS,jitter=MS,loss=PCT%%,rate=KBITS,queue=MS",
        ),
    ]


def add_content_options(p: argparse.ArgumentParser) -> Actions:
    """What the video shows and which face is swapped into it."""
    return [
        p.add_argument(
            "--test-cases",
            metavar="CASES",
            type=parse_test_cases,
            default=["single_face"],
            help="comma list: single_face, multi_face (each its own run)",
        ),
        p.add_argument(
            "--source-video", type=Path, help="single_face: frames of this clip instead of the still"
        ),
        p.add_argument(
            "--source-image",
            type=Path,
            help="face swapped into the video (POST /sources); default: the provisioned astronaut.png",
        ),
        p.add_argument(
            "--no-source",
            action="store_true",
            help="upload no source face (the gateway's default source, or pass-through)",
        ),
        p.add_argument(
            "--session-processors", help="per-session ?processors= (e.g. face_swapper,face_enhancer)"
        ),
        p.add_argument(
            "--loop-frames",
            metavar="N",
            type=int,
            default=0,
            help="precomputed frames per loop (default 0 = 2 s)",
        ),
        p.add_argument("--media-dir", type=Path, help="provisioned media (default ~/.cache/livefuse/media)"),
    ]


def add_timing_options(p: argparse.ArgumentParser) -> Actions:
    """The SLO and how jobs join."""
    return [
        p.add_argument(
            "--budget-ms", metavar="MS", type=float, default=150.0, help="end-to-end SLO per frame, p95"
        ),
        p.add_argument(
            "--warmup",
            metavar="SECONDS",
            type=float,
            default=2.0,
            help="seconds after ramp-up excluded from statistics",
        ),
        p.add_argument(
            "--ramp-up-rate", metavar="JOBS_PER_S", type=float, default=4.0, help="jobs joining per second"
        ),
    ]


def add_run_options(p: argparse.ArgumentParser) -> Actions:
    """`loadgen run`: a fixed number of jobs for a fixed time (or a sweep of durations)."""
    return [
        p.add_argument(
            "--concurrent-jobs", metavar="N", type=int, default=1, help="WHIP publishers at once (default 1)"
        ),
        p.add_argument(
            "--duration",
            metavar="SECONDS",
            type=float,
            default=30.0,
            help="measured seconds per run, after warm-up",
        ),
        p.add_argument(
            "--durations", metavar="SECONDS", type=float, nargs="+", help="sweep: several durations"
        ),
    ]


def add_capacity_options(p: argparse.ArgumentParser) -> Actions:
    """`loadgen capacity`: the search's bounds and how long each point is measured."""
    return [
        p.add_argument(
            "--keep-degradation",
            action="store_true",
            help="on an embedded gateway: leave its adaptive degradation on (default off, so the "
            "capacity is that of the full-quality pipeline)",
        ),
        p.add_argument("--capacity-start", metavar="N", type=int, default=1, help="first N"),
        p.add_argument("--capacity-step", metavar="N", type=int, default=2, help="N step before bisecting"),
        p.add_argument("--capacity-max-jobs", metavar="N", type=int, default=32, help="largest N tried"),
        p.add_argument(
            "--window", metavar="SECONDS", type=float, default=5.0, help="seconds per measurement window"
        ),
        p.add_argument("--max-windows", metavar="N", type=int, default=6, help="windows per point at most"),
        p.add_argument(
            "--capacity-max-time", metavar="SECONDS", type=float, default=900.0, help="total seconds at most"
        ),
    ]


def add_measure_options(p: argparse.ArgumentParser) -> Actions:
    """Everything `run` and `capacity` share."""
    return [
        *add_gateway_options(p),
        *add_stream_options(p),
        *add_content_options(p),
        *add_timing_options(p),
        *add_output_options(p),
    ]
