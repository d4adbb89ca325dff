"""Gateway configuration: frozen dataclasses built once at the edge (gateway.cli) and passed inward.

`GatewayConfig()` is the product's default: each field's default is the one `gateway --help` and
deploy/gateway.example.toml show (gateway.cli declares each option once, pointing at its field). The CLI adds
only what depends on the machine (workers and threads by core count, the model directory from
LIVEFUSE_MODEL_DIR, the monitor's event log and cores). Nothing below the CLI reads the environment or files.
The face pipeline's options are the fields of `engines.pipeline_config.PipelineConfig` itself, held here as
`pipeline`: an option points at its field, and the pipeline is built from that config as it is.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engines.pipeline_config import PipelineConfig
from gateway.auth import AuthConfig
from gateway.background import BackgroundConfig
from gateway.egress.config import EgressConfig
from gateway.exposure_rule import Listener
from gateway.http.cors import CorsConfig
from gateway.http.metrics_listener import MetricsListenerConfig
from gateway.http.rate_limit import RateLimitConfig
from gateway.http.tls import TlsConfig
from gateway.marking.config import MarkingConfig
from gateway.media.audio import AudioConfig
from gateway.media.late import LatePolicy
from gateway.scheduler import SchedulerConfig
from gateway.source_store import SourcesConfig
from gateway.webhooks.delivery import WebhookConfig
from gateway.webrtc.congestion.uplink_rate import UplinkRateConfig
from gateway.webrtc.interop.ice import IceConfig


def default_parallelism(engine: str, providers: tuple[str, ...], cores: int) -> tuple[int, int]:
    """(workers, ONNX Runtime intra-op threads) when the operator sets neither.

    On the CPU, one single-threaded batch per core beats one batch spread over all cores: much of a batch is
    Python and numpy work between engine calls (alignment, warps, paste) that one thread does anyway, and
    parallel batches come from different sessions. On a GPU (and with remote or torch engines) the same
    workers run the CPU stages around each engine call, most of a frame's work: one worker per core (up to
    16), each engine call with one ORT thread; the engines' own contexts (CUDA streams) bound what runs on the
    device at once, the rest of the workers keep the CPU stages going meanwhile.
    """
    if engine == "onnxruntime" and all(p == "cpu" for p in providers):
        return max(1, min(cores, 8)), 1
    return max(2, min(cores, 16)), 1


@dataclass(frozen=True)
class SessionConfig:
    max_sessions: int = 16
    # answered but not yet connected sessions (also counted in max_sessions); see SessionManager.admit
    max_pending: int = 4
    pending_grace_s: float = 5.0  # a pending session this old may be evicted for a new offer
    late_policy: LatePolicy = LatePolicy.REPEAT
    # `repeat` re-sends the last picture only after this long without a frame (media.late.repeat_due); 0 = for
    # every frame not processed. Under Chrome's freeze threshold at 15 fps (max(3 x 67, 67 + 150) ms).
    repeat_gap_ms: float = 200.0
    default_source: Path | None = None
    reap_after_s: float = 10.0  # a session not connected (or silent) this long is closed
    connect_timeout_s: float = 20.0  # from the answer to ICE/DTLS connected
    # ceiling of the processed stream's bitrate (bits/s); None = by its picture size, as libwebrtc does
    # (gateway.webrtc.congestion.bitrate.size_class_bitrate: 1 Mbit/s up to 320x240 ... 2.5 Mbit/s above
    # 960x540)
    bitrate: int | None = None
    max_viewers: int = 32
    network_allowance_ms: float = 10.0  # kept back from the budget for the trip back to the client
    audio: AudioConfig = field(default_factory=AudioConfig)  # the publisher's Opus, relayed to viewers
    uplink: UplinkRateConfig = field(default_factory=UplinkRateConfig)  # loss-based cap on REMB to publishers
    # answer transport-cc where a publisher offers it, and send it per-packet arrival feedback
    # (gateway.webrtc.congestion.transport_cc): browsers then run their own delay-based congestion control on
    # the uplink
    transport_cc: bool = True
    # change the VP8 / H.264 encoder's bitrate between frames through libvpx / libx264 itself
    # (gateway.webrtc.codecs.vp8_encoder, h264_encoder); off, or where the library does not load, FFmpeg's
    # encoder
    # is reopened at each new rate, with a keyframe
    live_bitrate: bool = True
    # NVDEC / NVENC where the GPU has them (gateway.webrtc.codecs.hw_decode, hw_encode); off: software only
    hardware_codecs: bool = True
    # disclosure of synthetic output: the invisible mark, its key, the visible label (gateway.marking)
    marking: MarkingConfig = field(default_factory=MarkingConfig)

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise ValueError("max_sessions must be >= 1")
        if self.max_pending < 1:
            raise ValueError("max_pending must be >= 1")
        if self.pending_grace_s < 0:
            raise ValueError("pending_grace_s must be >= 0")
        if self.repeat_gap_ms < 0:
            raise ValueError("repeat_gap_ms must be >= 0")
        if self.reap_after_s <= 0 or self.connect_timeout_s <= 0:
            raise ValueError("reap_after_s and connect_timeout_s must be > 0")
        if self.bitrate is not None and self.bitrate < 50_000:
            raise ValueError("bitrate must be at least 50 kbit/s (or automatic)")


@dataclass(frozen=True)
class GatewayConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    # the face pipeline's own config (engines.pipeline_config), each field and default written there once;
    # its processors are the sessions' default (() = none: frames pass through, decoded and re-encoded)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    model_dir: Path | None = None  # the pipeline's models (engines.models.store); None = the store's default
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    sessions: SessionConfig = field(default_factory=SessionConfig)
    ice: IceConfig = field(default_factory=IceConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    sources: SourcesConfig = field(default_factory=SourcesConfig)
    background: BackgroundConfig = field(default_factory=BackgroundConfig)
    rate_limit: RateLimitConfig = field(default_factory=RateLimitConfig)  # HTTP requests per client address
    monitor: Any = None  # gateway.monitoring.MonitorConfig; None = its defaults
    egress: EgressConfig = field(default_factory=EgressConfig)  # WHIP push downstream (gateway.egress)
    webhooks: WebhookConfig = field(default_factory=WebhookConfig)  # signed event POSTs (gateway.webhooks)
    max_body_bytes: int = 8 * 1024 * 1024  # client_max_size: source images; SDP is checked far lower
    max_sdp_bytes: int = 64 * 1024
    log_level: str = "INFO"
    header_timeout_s: float = 10.0  # a connection without a complete request this long is closed
    body_timeout_s: float = 30.0  # a request body not complete this long: 408
    # after a stop signal: new sessions refused, live ones given this long to end before they are closed
    drain_grace_s: float = 0.0
    shutdown_grace_s: float = 0.0  # after a stop signal: peers closed, 503s answered this long, then exit
    tls: TlsConfig | None = None  # HTTPS on the listening port (gateway.http.tls); None = plain HTTP
    public_url: str | None = None  # absolute base for WHIP/WHEP Location headers (one replica of many)
    front_process: bool = True  # HTTP in a process of its own (gateway.front)
    front_nice: int = 5  # the front process's priority below the media's (0..19)
    # CPUs the front process runs on (e.g. a core kept from the media process with taskset); () = any
    front_cpus: tuple[int, ...] = ()
    cors: CorsConfig = field(default_factory=CorsConfig)  # origins allowed to call WHIP/WHEP from a browser
    metrics: MetricsListenerConfig = field(default_factory=MetricsListenerConfig)  # /metrics on its own port

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0..65535, got {self.port}")
        for listener in self.listeners():  # by name here; by address at start (gateway.exposure_rule)
            if self.anonymous and not is_loopback(listener.host):
                raise ValueError(
                    f"refusing to listen on {listener.host or 'every address'} without a token "
                    f"({listener.name}): give --token-file (or LIVEFUSE_TOKEN_FILE, --tenants-file), or "
                    "--allow-anonymous to make every caller an admin"
                )
        if self.metrics.port is not None and self.metrics.port == self.port and self.port != 0:
            raise ValueError(f"--metrics-port must differ from --port ({self.port})")
        if self.public_url is not None:
            from gateway.http.urls import check_public_url

            object.__setattr__(self, "public_url", check_public_url(self.public_url))
        if self.shutdown_grace_s < 0 or self.drain_grace_s < 0:
            raise ValueError("shutdown_grace_s and drain_grace_s must be >= 0")
        if not 0 <= self.front_nice <= 19:
            raise ValueError(f"front nice must be 0..19, got {self.front_nice}")
        if any(c < 0 for c in self.front_cpus):
            raise ValueError(f"front cpus must be CPU numbers, got {list(self.front_cpus)}")
        if self.front_cpus and not self.front_process:
            raise ValueError("--front-cpus places the front process; with --no-front-process there is none")
        if self.log_level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError(f"log_level must be DEBUG, INFO, WARNING or ERROR, got {self.log_level!r}")

    @property
    def anonymous(self) -> bool:
        """No token and no --allow-anonymous: every listener must stay on loopback."""
        return not self.auth.enabled and not self.auth.allow_anonymous

    def listeners(self) -> tuple[Listener, ...]:
        """Every TCP listener the process opens (gateway.exposure_rule judges them alike)."""
        public = Listener("--host", self.host, self.port)
        if self.metrics.port is None:
            return (public,)
        return public, Listener("--metrics-address", self.metrics.address, self.metrics.port)


def is_loopback(host: str) -> bool:
    """Whether listening on `host` reaches this machine only: 127.0.0.0/8, ::1 or `localhost` (by name
    here; what `localhost` resolves to and binds is judged at start, gateway.exposure_rule)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a host name (resolved by the listener) or "" (every address)
