"""`gateway` console script: flags, a TOML file and LIVEFUSE_* variables -> GatewayConfig -> run the app.

Precedence: built-in defaults < --config FILE.toml < LIVEFUSE_<KEY> environment variables < flags. Only this
module reads files, the environment or decides exit codes; uvloop is installed here when available.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

from engines.models.store import default_model_dir
from engines.triton_engine import TritonConfig
from gateway.auth import AuthConfig
from gateway.config import GatewayConfig, ProcessingConfig, SessionConfig, default_parallelism
from gateway.control.capacity import usable_cores
from gateway.control.degradation import DegradationConfig
from gateway.egress.config import EgressConfig
from gateway.egress.policy import RetryConfig
from gateway.http.cors import CorsConfig
from gateway.http.metrics_listener import MetricsListenerConfig
from gateway.http.rate_limit import RateLimitConfig
from gateway.http.tls import TlsConfig, make_self_signed, server_context
from gateway.media.late import LatePolicy
from gateway.monitoring.monitor import MonitorConfig
from gateway.preflight import PreflightError, check_processing
from gateway.process_setup import setup_process
from gateway.scheduler import SchedulerConfig
from gateway.service_links import injected_by_kubernetes
from gateway.source_store import SourcesConfig
from gateway.tenants import load_tenants
from gateway.webhooks.delivery import WebhookConfig
from gateway.webrtc.interop.dscp import parse_dscp
from gateway.webrtc.interop.host_ports import parse_port_range
from gateway.webrtc.interop.ice import LOOPBACK, IceConfig, TurnServer
from gateway.webrtc.version_check import UncheckedVersion, check_aiortc, installed_version


class UsageError(ValueError):
    """A bad command line; main() prints it as one line and exits 2."""


DEFAULT_EVENT_LOG = Path.home() / ".local" / "state" / "livefuse" / "events.jsonl"


ENV_PREFIX = "LIVEFUSE_"
# LIVEFUSE_* variables that belong to other tools (the load generator's media cache), not to a gateway flag
OTHER_ENV = frozenset({"LIVEFUSE_MEDIA_DIR"})
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def version_line() -> str:
    v = installed_version
    return f"gateway (livefuse) {v('livefuse')}; aiortc {v('aiortc')}, av {v('av')}"


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting: main() owns output and exit codes."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see gateway --help)")


def build_parser() -> argparse.ArgumentParser:
    """The flags, in the groups `gateway --help` shows. Every flag is also a TOML key (dashes or underscores)
    and a LIVEFUSE_<KEY> environment variable (config_sources)."""
    p = _Parser(
        prog="gateway",
        description="livefuse real-time face-swap gateway (WHIP/WHEP).",
        epilog="Every flag is also a key of the --config TOML file (deploy/gateway.example.toml lists them "
        "all) and an environment variable LIVEFUSE_<KEY> (LIVEFUSE_MAX_SESSIONS=8; true/false for switches). "
        "Precedence: defaults < file < environment < flags.",
    )
    p.add_argument("--version", action="version", version=version_line())
    a = p.add_argument
    a(
        "--config",
        type=Path,
        help="TOML file with the same keys as the flags (LIVEFUSE_* and flags override it); "
        "default $LIVEFUSE_CONFIG",
    )
    g = p.add_argument_group("network", "where the gateway listens and how media reaches it")
    a = g.add_argument
    a("--host", help="address to listen on (default 127.0.0.1)")
    a("--port", type=int, help="HTTP port (default 8080)")
    a(
        "--public-url",
        help="this replica's own reachable base URL (e.g. https://gw-3.media.example): "
        "WHIP/WHEP Location headers become absolute so PATCH/DELETE reach this replica behind a balancer",
    )
    a("--stun", action="append", help="STUN server URL advertised and used (repeatable)")
    a("--turn", action="append", help="TURN server as url[,username,credential] (repeatable)")
    a(
        "--ice-loopback-only",
        action="store_true",
        default=None,
        help="gather ICE candidates on 127.0.0.1 only (tests, local load generation)",
    )
    a(
        "--ice-udp-ports",
        metavar="FIRST-LAST",
        help="bind the media's UDP sockets within this port range, e.g. 40000-40999, to open in a firewall "
        "(default: any free port)",
    )
    a(
        "--ice-public-address",
        metavar="IP|auto",
        help="advertise host candidates at this address instead of the machine's own: the public side of a "
        "1:1 NAT, or a node's external address for hostNetwork pods; 'auto' asks the first --stun server "
        "at start-up (default: the interface addresses)",
    )
    a(
        "--media-dscp",
        help="DSCP mark on every media packet the gateway sends: a name (af41 for video per "
        "RFC 8837, ef, cs1, ...) or 0-63 (default: unmarked)",
    )
    a(
        "--no-front-process",
        action="store_true",
        default=None,
        help="serve HTTP from the media process itself instead of a front process that refuses bad "
        "requests and forwards the rest over a private Unix socket (gateway.front)",
    )
    a("--front-nice", type=int, help="the front process's priority below the media process's (default 5)")
    a(
        "--front-cpus",
        help="CPUs the front process runs on, e.g. 3 or 2-3 (default: any the gateway may use); with the "
        "gateway itself started under `taskset -c` on the others, request floods stay off the media's cores",
    )
    g = p.add_argument_group("media", "what a session does to its video and audio")
    a = g.add_argument
    a(
        "--processors",
        help="default processors: face_swapper[,face_enhancer] or none (pass-through); "
        "a WHIP ?processors= overrides",
    )
    a(
        "--mask-regions",
        help="target regions kept from the frame, not swapped, comma-separated: mouth, eyes (the eye "
        "openings), eye_area (eyes with lids and lashes) or none (default mouth,eyes); a WHIP ?mask= "
        "overrides",
    )
    a(
        "--face-selector",
        help="faces swapped: many (default) or one (the largest); a WHIP ?faces= overrides "
        "(?faces=reference&reference=<source id>: the face most like an uploaded image, needs ArcFace)",
    )
    a("--poisson-blend", action="store_true", default=None, help="mesh_warp: Poisson (seamless) blending")
    a(
        "--face-shape",
        type=float,
        help="mesh_warp: how much of the source's face shape (outline, jaw, "
        "proportions) the swap takes, 0..1 (default 1; 0 = the target's); a WHIP ?shape= overrides",
    )
    a("--mask-blur", type=float, help="inswapper/GFPGAN paste mask blur, 0..1 (default 0.3)")
    a(
        "--mask-padding",
        help="inswapper/GFPGAN paste mask padding in %%: top,right,bottom,left (default 0,0,0,0)",
    )
    a("--default-source", type=Path, help="source face image used when WHIP gives no ?source=")
    a(
        "--late-policy",
        choices=[p.value for p in LatePolicy],
        help="frame not processed in time: repeat the last processed one (default, never leaks an unswapped "
        "face) or pass the original through",
    )
    a(
        "--repeat-gap-ms",
        type=float,
        help="--late-policy repeat: re-send the last picture only after this "
        "long without a frame (default 200; 0 = for every frame not processed)",
    )
    a(
        "--video-bitrate",
        metavar="KBPS|auto",
        help="ceiling of each processed stream's bitrate in kbit/s; the receivers' feedback moves it below "
        "(default auto: by the picture's size, as libwebrtc does: 1700 up to 640x480, 2000 up to 960x540, "
        "2500 above, and never under 1000)",
    )
    a(
        "--no-uplink-loss-cap",
        action="store_true",
        default=None,
        help="send publishers aiortc's delay-based REMB only, without the cap from the loss and the queue "
        "seen on their stream (gateway.webrtc.congestion.uplink_rate)",
    )
    a(
        "--no-transport-cc",
        action="store_true",
        default=None,
        help="answer publishers without transport-cc: they then adapt to REMB and loss only "
        "(gateway.webrtc.congestion.transport_cc)",
    )
    a(
        "--no-live-bitrate",
        action="store_true",
        default=None,
        help="reopen FFmpeg's VP8/H.264 encoder, with a keyframe, at each new bitrate instead of changing "
        "libvpx's or libx264's rate between frames (gateway.webrtc.codecs.vp8_encoder, h264_encoder)",
    )
    a(
        "--no-hardware-codecs",
        action="store_true",
        default=None,
        help="decode and encode in software even where the GPU has NVDEC / NVENC (default: hardware where "
        "it opens, software otherwise; /api/stats decoder and encoder say which runs)",
    )
    a(
        "--no-audio",
        action="store_true",
        default=None,
        help="answer every audio m-line inactive instead of relaying the publisher's Opus to WHEP viewers",
    )
    g = p.add_argument_group("models", "which models run, and on what")
    a = g.add_argument
    a("--model-dir", type=Path, help="model directory (default ~/.cache/livefuse/models)")
    a("--swapper", help="swapper model: mesh_warp | inswapper_128")
    a("--enhancer", help="enhancer model: detail | gfpgan_1.4")
    a("--detector-size", type=int, help="face detector letterbox size, multiple of 32 (default 320)")
    a(
        "--engine",
        choices=["onnxruntime", "tensorrt", "triton", "torch"],
        help="inference backend (default onnxruntime; triton = a Triton Inference Server at --triton-url; "
        "torch = PyTorch via onnx2torch, on --providers cuda or cpu)",
    )
    a("--providers", help="comma list of ONNX Runtime providers: cpu,cuda,tensorrt (default cpu)")
    a("--device-id", type=int, help="GPU index for cuda/tensorrt (default 0)")
    a(
        "--fp16",
        action="store_true",
        default=None,
        help="FP16 engines (ORT CUDA/TensorRT providers; fp16 plans; torch)",
    )
    a(
        "--trt-cache-dir",
        type=Path,
        help="--engine tensorrt: directory of plans built by scripts/build_engines.py; "
        "--providers tensorrt: ORT's engine + timing cache",
    )
    a(
        "--intra-op-threads",
        type=int,
        help="ONNX Runtime threads per engine call (default: 1 on the CPU "
        "with several workers, else all cores)",
    )
    a("--contexts", type=int, help="--engine tensorrt|torch: execution contexts (CUDA streams), default 2")
    a("--triton-url", help="--engine triton: gRPC endpoint HOST:PORT (default 127.0.0.1:8001)")
    a("--triton-model-prefix", help="--engine triton: prefix of the repository's model names (default none)")
    a(
        "--triton-shm",
        action="store_true",
        default=None,
        help="--engine triton: pass tensors through system shared memory (server on the same host only)",
    )
    a("--triton-timeout-s", type=float, help="--engine triton: per-request deadline (default 10)")
    a(
        "--triton-connect-timeout-s",
        type=float,
        help="--engine triton: at start-up, wait this long for the server and its models (default 60)",
    )
    g = p.add_argument_group("limits", "how much the gateway takes on, and how long it waits")
    a = g.add_argument
    a("--max-sessions", type=int, help="concurrent publishers; more get 503 + Retry-After (default 16)")
    a(
        "--max-pending",
        type=int,
        help="sessions answered but not yet connected (also counted in --max-sessions); when full, the "
        "oldest one past --pending-grace-s is evicted for a new offer, else 503 (default 4)",
    )
    a(
        "--pending-grace-s",
        type=float,
        help="seconds a pending session may take to connect before eviction (default 5)",
    )
    a("--reap-after-s", type=float, help="close sessions silent/disconnected this long (default 10)")
    a("--budget-ms", type=float, help="per-frame latency budget; later frames are dropped (default 150)")
    a(
        "--interval-deadline-batches",
        type=float,
        help="also drop a frame that cannot be processed before its session's next frame is due, or within "
        "this many single-frame batch times if longer (default 3; 0 = the budget alone)",
    )
    a("--max-batch", type=int, help="largest cross-session batch (default 8)")
    a("--max-queue-delay-ms", type=float, help="longest a frame waits for batch partners (default 4)")
    a(
        "--batch-wait",
        choices=("cost", "window"),
        help="when to wait for batch partners: 'cost' = only for partners predicted to arrive, and only when "
        "the measured batch costs say it pays (default); 'window' = whenever another session is active",
    )
    a(
        "--workers",
        type=int,
        help="batches run concurrently (default: one per core with 1 ORT thread each on the CPU, 2 on a GPU)",
    )
    a(
        "--rate-limit",
        type=float,
        help="HTTP requests per second per client address, sustained; more get 429 "
        "+ Retry-After before any other work (default 20; 0 = off; media is never limited)",
    )
    a("--rate-burst", type=int, help="HTTP requests a client address may send at once (default 60)")
    a(
        "--header-timeout-s",
        type=float,
        help="close connections without a complete request this long "
        "(slowloris; also the idle keep-alive time), default 10",
    )
    a("--body-timeout-s", type=float, help="a request body not complete this long gets 408 (default 30)")
    a("--max-source-pixels", type=int, help="source uploads declaring more pixels get 413 (default 40e6)")
    a("--max-sources", type=int, help="uploaded sources kept; least recently used go first (default 64)")
    a("--source-ttl-s", type=float, help="forget a source this long after its last use; 0 = never (3600)")
    a(
        "--drain-grace-s",
        type=float,
        help="on SIGTERM/SIGINT: refuse new sessions, then wait up to this long for live ones to end before "
        "closing them (default 0: close at once)",
    )
    a(
        "--shutdown-grace-s",
        type=float,
        help="on SIGTERM/SIGINT: close every peer, then keep answering 503 this long before exiting "
        "(default 0; a second signal cuts it short)",
    )
    g = p.add_argument_group("security", "who may do what, and over what")
    a = g.add_argument
    a("--token", help="bearer token required on every mutating endpoint")
    a("--token-file", type=Path, help="read the bearer token from this file")
    a(
        "--tenants-file",
        type=Path,
        help="TOML file of named tenants ([tenants.NAME] token=, max_sessions=, admin=); each owns the "
        "sessions and sources it creates (combines with --token, which is one admin tenant)",
    )
    a("--protect-reads", action="store_true", default=None, help="also require the token on read-only pages")
    a(
        "--allow-anonymous",
        action="store_true",
        default=None,
        help="listen on a non-loopback --host without any token (every caller is an admin); without it the "
        "gateway refuses to start that way",
    )
    a(
        "--cors-origin",
        action="append",
        metavar="ORIGIN",
        help="an origin (https://studio.example) whose pages may call WHIP/WHEP from a browser; repeatable, "
        "'*' = any (default none: only the gateway's own pages)",
    )
    a(
        "--tls-cert",
        type=Path,
        help="PEM certificate (chain): serve HTTPS, so WHIP, WHEP and /demo work from other machines",
    )
    a("--tls-key", type=Path, help="PEM private key of --tls-cert")
    a(
        "--self-signed",
        action="store_true",
        default=None,
        help="DEVELOPMENT ONLY: serve HTTPS with a throw-away self-signed certificate made at start-up "
        "(browsers warn; clients cannot verify it)",
    )
    a(
        "--trusted-proxies",
        help="comma list of proxy addresses or networks (10.0.0.0/8) whose X-Forwarded-For names the client "
        "for the rate limit; from any other peer the header is ignored (default none)",
    )
    g = p.add_argument_group(
        "egress and webhooks", "pushing processed streams into the platform's media servers; signed events"
    )
    a = g.add_argument
    a(
        "--egress-url",
        help="WHIP endpoint every session pushes its processed stream to (video + Opus; {session} becomes "
        "the session id) unless it names its own (?egress=URL | none)",
    )
    a("--egress-token", help="bearer token for --egress-url")
    a("--egress-token-file", type=Path, help="read the --egress-url bearer token from this file")
    a(
        "--egress-allow",
        action="append",
        metavar="URL",
        help="WHIP endpoints a client may name for its session (?egress=, POST /sessions/{id}/egress): "
        "scheme, host and port exact, the path by prefix; repeatable; '*' = any public address; loopback "
        "and private addresses only where an entry names them (default none: only --egress-url)",
    )
    a(
        "--egress-max-attempts",
        type=int,
        help="failed egress attempts in a row (5xx, network, lost link) before the push gives up; "
        "0 = retry while the session lives (default 6)",
    )
    a(
        "--egress-host",
        action="append",
        metavar="ADDRESS",
        help="local address egress peers gather ICE candidates on (repeatable; default: every interface)",
    )
    a(
        "--webhook-url",
        action="append",
        help="POST session.started/ended/degraded, degraded and egress.failed events here, signed "
        "(Livefuse-Signature: HMAC-SHA256, docs/EGRESS.md); repeatable",
    )
    a("--webhook-secret", help="HMAC secret that signs every webhook (required with --webhook-url)")
    a("--webhook-secret-file", type=Path, help="read the webhook secret from this file")
    a(
        "--webhook-events",
        help="comma-separated events to send (default all: session.started, session.ended, "
        "session.degraded, degraded, egress.failed)",
    )
    a("--webhook-attempts", type=int, help="attempts per webhook on 5xx/network errors (default 5)")
    g = p.add_argument_group("monitoring", "what the gateway records and reports")
    a = g.add_argument
    a("--log-level", help="DEBUG | INFO | WARNING | ERROR (default INFO)")
    a(
        "--event-log",
        type=Path,
        help="JSONL event log, appended and rotated by size (default ~/.local/state/livefuse/events.jsonl; "
        "'none' keeps events in memory only)",
    )
    a("--event-log-max-mb", type=float, help="rotate the event log past this size (default 5)")
    a("--sample-interval-s", type=float, help="system sampler period at rest, adaptive around it (default 1)")
    a(
        "--metrics-port",
        type=int,
        help="serve /metrics (and what --metrics-routes adds) on this port instead of the public one, where "
        "they then answer 404 (default: on the public port)",
    )
    a("--metrics-address", help="address of the --metrics-port listener (default 127.0.0.1)")
    a(
        "--metrics-per-session",
        action="store_true",
        default=None,
        help="also export the per-session families (livefuse_session_*{session}); one series per publisher "
        "ever seen, so off by default (/api/stats lists sessions either way)",
    )
    a(
        "--metrics-routes",
        help="what moves to --metrics-port, comma-separated: metrics (/metrics), api (/api/stats, "
        "/api/stream), dashboard (/dashboard) (default metrics)",
    )
    a(
        "--no-degradation",
        action="store_true",
        default=None,
        help="never step the pipeline down (enhancer off, detect every 2nd frame, ...) under overload",
    )
    return p


def env_values(parser: argparse.ArgumentParser, environ: Mapping[str, str]) -> dict[str, Any]:
    """LIVEFUSE_<KEY> variables as flag values: LIVEFUSE_MAX_SESSIONS=8, LIVEFUSE_NO_AUDIO=true,
    LIVEFUSE_STUN="stun:a:3478 stun:b:3478" (repeatable flags: space-separated). An unknown LIVEFUSE_*
    name is an error (a typo would otherwise be ignored), except the names a Kubernetes kubelet injects for
    Services (LIVEFUSE_GATEWAY_SERVICE_HOST, ...; gateway.service_links), which are skipped."""
    actions = {a.dest: a for a in parser._actions if a.option_strings and a.dest not in ("help", "version")}
    values: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name in OTHER_ENV:
            continue
        key = name[len(ENV_PREFIX) :].lower()
        action = actions.get(key)
        if injected_by_kubernetes(name, raw, known_setting=action is not None):
            continue
        if action is None:
            raise UsageError(f"unknown environment variable {name} (see gateway --help)")
        try:
            if action.nargs == 0:  # a switch
                if raw.strip().lower() not in _TRUE + _FALSE:
                    raise ValueError(f"true or false, got {raw!r}")
                values[key] = raw.strip().lower() in _TRUE
            elif type(action).__name__ == "_AppendAction":
                values[key] = raw.split()
            else:
                value = action.type(raw) if callable(action.type) else raw
                if action.choices is not None and value not in action.choices:
                    raise ValueError(f"one of {', '.join(map(str, action.choices))}, got {raw!r}")
                values[key] = value
        except ValueError as exc:
            raise UsageError(f"{name}: {str(exc) or 'bad value'}") from None
    return values


def _tls(get: Any) -> TlsConfig | None:
    cert, key = get("tls_cert"), get("tls_key")
    if get("self_signed"):
        if cert or key:
            raise ValueError("--self-signed makes its own certificate: give it without --tls-cert/--tls-key")
        return None  # made in main(), once the config is known to be good
    if bool(cert) != bool(key):
        raise ValueError("--tls-cert and --tls-key go together")
    return TlsConfig(cert=Path(str(cert)), key=Path(str(key))) if cert else None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _split(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return tuple(v.strip() for v in str(value).split(",") if v.strip())


def _padding(value: Any, default: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    parts = _split(value)
    if parts is None:
        return default
    if len(parts) != 4:
        raise ValueError(f"mask padding needs 4 numbers (top,right,bottom,left), got {value!r}")
    top, right, bottom, left = (float(p) for p in parts)
    return top, right, bottom, left


def _bitrate_kbps(value: Any) -> int | None:
    """--video-bitrate (kbit/s, or `auto`) as bits per second; None = by the picture's size."""
    if value is None or str(value).strip().lower() == "auto":
        return None
    try:
        kbps = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"--video-bitrate takes kbit/s or 'auto', got {value!r}") from None
    if not 50 <= kbps <= 50_000:
        raise ValueError(f"--video-bitrate must be 50..50000 kbit/s, got {value!r}")
    return int(kbps * 1000)


def _cpu_list(value: Any, allowed: set[int]) -> tuple[int, ...]:
    """--front-cpus: "3", "2,3" or "2-3" (a TOML list too), each one a CPU this process may run on."""
    cpus: set[int] = set()
    for part in _split(value) or ():
        try:
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
        except ValueError:
            raise ValueError(f"--front-cpus takes CPU numbers such as 3, 2,3 or 2-3, got {value!r}") from None
    if cpus - allowed:
        raise ValueError(
            f"--front-cpus: CPU {sorted(cpus - allowed)} is not one this gateway may run on "
            f"({','.join(map(str, sorted(allowed)))})"
        )
    return tuple(sorted(cpus))


def _processors(value: Any, default: tuple[str, ...]) -> tuple[str, ...]:
    """`none` (or an empty list) = no processing: frames pass through the media path untouched."""
    names = _split(value)
    if names is None:
        return default
    return tuple(n for n in names if n.lower() != "none")


def _triton_config(get: Any) -> TritonConfig:
    base = TritonConfig()
    return TritonConfig(
        url=str(get("triton_url", base.url)),
        model_prefix=str(get("triton_model_prefix", base.model_prefix)),
        shm=bool(get("triton_shm", base.shm)),
        timeout_s=float(get("triton_timeout_s", base.timeout_s)),
        connect_timeout_s=float(get("triton_connect_timeout_s", base.connect_timeout_s)),
    )


def merged_values(
    args: argparse.Namespace, file_values: dict[str, Any] | None = None, env: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One value per key: flags over environment over file."""
    merged: dict[str, Any] = {k.replace("-", "_"): v for k, v in (file_values or {}).items()}
    unknown = sorted(set(merged) - set(vars(args)) - {"config"})
    if unknown:
        raise ValueError(f"unknown key(s) in config file: {', '.join(unknown)}")
    merged.update(env or {})
    merged.update({k: v for k, v in vars(args).items() if v is not None})
    return merged


def build_config(
    args: argparse.Namespace,
    file_values: dict[str, Any] | None = None,
    env: dict[str, Any] | None = None,
) -> GatewayConfig:
    """Merge TOML values (keys like the flags, dashes or underscores), then environment values (env_values),
    under the parsed flags."""
    get = merged_values(args, file_values, env).get
    token = get("token")
    if token is None and get("token_file") is not None:
        token = _secret(get("token_file"), "--token-file")
    tenants = load_tenants(Path(str(get("tenants_file")))) if get("tenants_file") else ()
    processing = ProcessingConfig()
    auto_workers, auto_threads = default_parallelism(
        str(get("engine", processing.engine)), _split(get("providers")) or processing.providers, _cores()
    )
    asked_workers = get("workers")
    if asked_workers is not None and get("intra_op_threads") is None and int(asked_workers) == 1:
        auto_threads = 0  # one worker asked for: let ORT use every core
    processing = replace(
        processing,
        processors=_processors(get("processors"), processing.processors),
        swapper=get("swapper", processing.swapper),
        enhancer=get("enhancer", processing.enhancer),
        detector_size=int(get("detector_size", processing.detector_size)),
        engine=get("engine", processing.engine),
        providers=_split(get("providers")) or processing.providers,
        max_batch=int(get("max_batch", processing.max_batch)),
        device_id=int(get("device_id", processing.device_id)),
        fp16=bool(get("fp16", processing.fp16)),
        trt_cache_dir=Path(str(get("trt_cache_dir"))) if get("trt_cache_dir") else None,
        intra_op_threads=int(get("intra_op_threads", auto_threads)),
        contexts=int(get("contexts", processing.contexts)),
        triton=_triton_config(get) if get("engine") == "triton" else None,
        mask_regions=_processors(get("mask_regions"), processing.mask_regions),
        face_selector=str(get("face_selector", processing.face_selector)),
        poisson_blend=bool(get("poisson_blend", processing.poisson_blend)),
        face_shape=float(get("face_shape", processing.face_shape)),
        mask_blur=float(get("mask_blur", processing.mask_blur)),
        mask_padding=_padding(get("mask_padding"), processing.mask_padding),
        # flag/TOML > $LIVEFUSE_MODEL_DIR > ~/.cache/livefuse/models, resolved here at the edge
        model_dir=Path(str(get("model_dir"))) if get("model_dir") else default_model_dir(os.environ),
    )
    sched = SchedulerConfig()
    scheduler = SchedulerConfig(
        max_batch=int(get("max_batch", sched.max_batch)),
        max_queue_delay_ms=float(get("max_queue_delay_ms", sched.max_queue_delay_ms)),
        batch_wait=str(get("batch_wait", sched.batch_wait)),
        interval_deadline_batches=float(get("interval_deadline_batches", sched.interval_deadline_batches)),
        workers=int(get("workers", auto_workers)),
        budget_ms=float(get("budget_ms", sched.budget_ms)),
    )
    sess = SessionConfig()
    sessions = replace(
        sess,
        max_sessions=int(get("max_sessions", sess.max_sessions)),
        max_pending=int(get("max_pending", sess.max_pending)),
        pending_grace_s=float(get("pending_grace_s", sess.pending_grace_s)),
        late_policy=LatePolicy(get("late_policy", sess.late_policy)),
        repeat_gap_ms=float(get("repeat_gap_ms", sess.repeat_gap_ms)),
        bitrate=_bitrate_kbps(get("video_bitrate", "auto")),
        default_source=Path(str(get("default_source"))) if get("default_source") else None,
        reap_after_s=float(get("reap_after_s", sess.reap_after_s)),
        audio=replace(sess.audio, enabled=not get("no_audio", False)),
        uplink=replace(sess.uplink, enabled=not get("no_uplink_loss_cap", False)),
        transport_cc=not get("no_transport_cc", False),
        live_bitrate=not get("no_live_bitrate", False),
        hardware_codecs=not get("no_hardware_codecs", False),
    )
    src = SourcesConfig()
    sources = replace(
        src,
        max_pixels=int(get("max_source_pixels", src.max_pixels)),
        max_sources=int(get("max_sources", src.max_sources)),
        ttl_s=float(get("source_ttl_s", src.ttl_s)),
    )
    turns = []
    for spec in get("turn") or []:
        parts = (str(spec).split(",") + ["", ""])[:3]
        turns.append(TurnServer(parts[0], parts[1], parts[2]))
    ice = IceConfig(
        stun=_split(get("stun")) or (),
        turn=tuple(turns),
        host_addresses=LOOPBACK if get("ice_loopback_only") else (),
        dscp=None if get("media_dscp") is None else parse_dscp(str(get("media_dscp"))),
        udp_ports=parse_port_range(str(get("ice_udp_ports"))) if get("ice_udp_ports") else None,
        public_address=_public_address(get("ice_public_address"), get("stun")),
    )
    event_log = get("event_log", DEFAULT_EVENT_LOG)
    monitor = MonitorConfig(
        sample_interval_s=float(get("sample_interval_s", 1.0)),
        budget_ms=scheduler.budget_ms,
        event_log=None if str(event_log).lower() == "none" else Path(str(event_log)),
        event_log_max_bytes=int(float(get("event_log_max_mb", 5.0)) * 1_000_000),
        degradation=DegradationConfig(enabled=not get("no_degradation", False)),
        parallelism=float(scheduler.workers),
        cpu_cores=usable_cores(),  # affinity and the cgroup quota (a pod's CPU limit), read here at the edge
    )
    return GatewayConfig(
        host=get("host", "127.0.0.1"),
        port=int(get("port", 8080)),
        processing=processing,
        scheduler=scheduler,
        sessions=sessions,
        sources=sources,
        ice=ice,
        auth=AuthConfig(
            token=token,
            protect_reads=bool(get("protect_reads", False)),
            tenants=tenants,
            allow_anonymous=bool(get("allow_anonymous", False)),
        ),
        cors=CorsConfig(origins=_split(get("cors_origin")) or ()),
        metrics=MetricsListenerConfig(
            port=None if get("metrics_port") is None else int(str(get("metrics_port"))),
            address=str(get("metrics_address", MetricsListenerConfig.address)),
            groups=_split(get("metrics_routes")) or MetricsListenerConfig.groups,
            per_session=bool(get("metrics_per_session", False)),
        ),
        header_timeout_s=float(get("header_timeout_s", 10.0)),
        body_timeout_s=float(get("body_timeout_s", 30.0)),
        rate_limit=RateLimitConfig(
            rate_per_s=float(get("rate_limit", RateLimitConfig.rate_per_s)),
            burst=int(get("rate_burst", RateLimitConfig.burst)),
            trusted_proxies=_split(get("trusted_proxies")) or (),
        ),
        log_level=str(get("log_level", "INFO")).upper(),
        drain_grace_s=float(get("drain_grace_s", 0.0)),
        shutdown_grace_s=float(get("shutdown_grace_s", 0.0)),
        tls=_tls(get),
        public_url=str(get("public_url")) if get("public_url") else None,
        front_process=not get("no_front_process", False),
        front_nice=int(get("front_nice", 5)),
        front_cpus=_cpu_list(get("front_cpus"), os.sched_getaffinity(0)),
        monitor=monitor,
        egress=_egress_config(get),
        webhooks=_webhook_config(get),
    )


def _secret(path: Any, flag: str) -> str:
    """A token read from a file (a mounted Secret): one line, not empty."""
    try:
        value = Path(str(path)).read_text().strip()
    except OSError as exc:
        raise ValueError(f"{flag} {path}: {exc.strerror or exc}") from None
    if not value:
        raise ValueError(f"{flag} {path} is empty")
    return value


def _public_address(value: Any, stun: Any) -> str | None:
    """--ice-public-address IP, or `auto` (None here: main() asks the first --stun server at start-up)."""
    if not value:
        return None
    if _auto_address(value):
        servers = _split(stun) or ()
        if not servers:
            raise ValueError("--ice-public-address auto asks the first --stun server: give one (--stun URL)")
        from gateway.stun_discovery import parse_stun_url

        parse_stun_url(servers[0])  # a bad URL: one line now, not at start-up
        return None
    return str(value)


def _webhook_config(get: Any) -> WebhookConfig:
    secret = get("webhook_secret")
    if secret is None and get("webhook_secret_file") is not None:
        secret = Path(str(get("webhook_secret_file"))).read_text().strip()
    hooks = WebhookConfig()
    return WebhookConfig(
        urls=_split(get("webhook_url")) or (),
        secret=secret or None,
        events=_split(get("webhook_events")) or hooks.events,
        max_attempts=int(get("webhook_attempts", hooks.max_attempts)),
    )


def _egress_config(get: Any) -> EgressConfig:
    token = get("egress_token")
    if token is None and get("egress_token_file") is not None:
        token = Path(str(get("egress_token_file"))).read_text().strip()
    retry = RetryConfig()
    return EgressConfig(
        default_url=str(get("egress_url")) if get("egress_url") else None,
        default_token=token or None,
        allowed_prefixes=_split(get("egress_allow")) or (),
        host_addresses=_split(get("egress_host")) or (),
        retry=replace(retry, max_attempts=int(get("egress_max_attempts", retry.max_attempts))),
    )


async def serve(config: GatewayConfig) -> int:
    """Run until SIGINT/SIGTERM; returns the exit code.

    On a signal: refuse new sessions, give live ones up to `drain_grace_s` to end (a second signal cuts it
    short), close the rest (the HTTP server keeps answering 503 and /readyz 503 for `shutdown_grace_s`),
    then stop listening, drain workers, close models.
    A background start-up failure (a model missing, say) ends the process with code 1 and one log line.
    """
    from gateway.app import begin_shutdown, create_app, drain_sessions
    from gateway.http.keys import STATE
    from gateway.listening import listening, media_config

    log = logging.getLogger("gateway")
    app = create_app(media_config(config))
    stop = asyncio.Event()
    hurry = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        (hurry if stop.is_set() else stop).set()

    # before anything listens: a SIGTERM as soon as the front answers is a drain, not the default death
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    # leaving the block stops listening (the front process first), then cleanup_ctx drains and closes models
    async with listening(app, config) as drain_front:
        state = app[STATE]
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(state.started.wait())]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if not stop.is_set() and state.startup_error is None:
            await stop.wait()
        for w in waiters:
            w.cancel()
        code = 0
        if state.startup_error is not None and not stop.is_set():
            log.error("start-up failed: %s", state.startup_error)
            code = 1
        else:
            log.info("stopping: refusing new sessions")
        drain_front()
        if config.drain_grace_s > 0 and code == 0:
            log.info("draining: waiting up to %g s for live sessions to end", config.drain_grace_s)
            left = await drain_sessions(app, config.drain_grace_s, hurry)
            if left:
                log.warning("drain grace over: closing %d live session(s)", left)
        await begin_shutdown(app)
        if config.shutdown_grace_s > 0 and code == 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(hurry.wait(), config.shutdown_grace_s)
        return code


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass(frozen=True)
class StartupSteps:
    """What main() does once the configuration is good: a certificate to make (--self-signed), the public
    address to ask the first STUN server for (--ice-public-address auto)."""

    self_signed: bool = False
    discover_address: bool = False


def load_config(argv: Sequence[str] | None, environ: Mapping[str, str]) -> tuple[GatewayConfig, StartupSteps]:
    """The configuration loader: flags, the environment (LIVEFUSE_*) and the TOML file they name, merged
    into a GatewayConfig, and the start-up steps they ask for. Raises UsageError/ValueError/OSError on a
    bad setting; checks nothing about the machine."""
    parser = build_parser()
    args = parser.parse_args(argv)
    env = env_values(parser, environ)
    config_file = args.config or env.pop("config", None)
    file_values: dict[str, Any] = {}
    if config_file is not None:
        with open(config_file, "rb") as fh:
            file_values = tomllib.load(fh)
    file_values.pop("config", None)
    config = build_config(args, file_values, env)
    get = merged_values(args, file_values, env).get
    return config, StartupSteps(
        self_signed=bool(get("self_signed")), discover_address=_auto_address(get("ice_public_address"))
    )


def _auto_address(value: Any) -> bool:
    return value is not None and str(value).strip().lower() == "auto"


def _discovered(config: GatewayConfig) -> GatewayConfig:
    """--ice-public-address auto: the first --stun server's view of this machine, or one line and exit 2."""
    from gateway.stun_discovery import DiscoveryError, discover_public_address

    try:
        address = asyncio.run(discover_public_address(config.ice.stun[0]))
    except DiscoveryError as exc:
        raise ValueError(f"--ice-public-address auto: {exc}") from None
    return replace(config, ice=replace(config.ice, public_address=address))


def main(argv: Sequence[str] | None = None) -> int:
    """Exit codes: 0 clean stop, 1 failure while running, 2 bad command line, config or machine."""
    try:
        config, steps = load_config(argv, os.environ)
        check_aiortc(installed_version("aiortc"))
        check_processing(config.processing)
        if steps.discover_address:
            config = _discovered(config)
        if steps.self_signed:
            folder = Path(tempfile.mkdtemp(prefix="livefuse-tls-"))
            config = replace(config, tls=make_self_signed(folder, config.host))
        if config.tls is not None:
            server_context(config.tls)  # a bad certificate or key: one line here, not a front that dies
    except (OSError, ValueError, TypeError, tomllib.TOMLDecodeError, PreflightError, UncheckedVersion) as exc:
        print(f"gateway: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    setup_process(config.log_level)
    if steps.discover_address:
        logging.getLogger("gateway").info(
            "ICE host candidates advertise %s (asked of %s)", config.ice.public_address, config.ice.stun[0]
        )
    if config.tls is not None and config.tls.self_signed:
        logging.getLogger("gateway").warning(
            "DEVELOPMENT ONLY: HTTPS with a self-signed certificate made just now (%s); clients cannot "
            "verify it and browsers will warn. Use --tls-cert/--tls-key or a TLS-terminating proxy in "
            "production.",
            config.tls.cert,
        )
    try:
        return asyncio.run(serve(config))
    except KeyboardInterrupt:
        return 0
    except Exception as exc:
        logging.getLogger("gateway").error("gateway failed: %s", _one_line(exc))
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
