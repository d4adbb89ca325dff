"""What the front process is told: limits and tokens, nothing of the media config (gateway.front)."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gateway.auth import AuthConfig
from gateway.http.cors import CorsConfig
from gateway.http.rate_limit import RateLimitConfig
from gateway.http.tls import TlsConfig

if TYPE_CHECKING:
    from gateway.config import GatewayConfig

DRAIN_SIGNAL = signal.SIGUSR1  # supervisor -> front: the gateway is shutting down
PRIVATE_DIR_PREFIX = "livefuse-"  # the media socket's directory (gateway.listening)


@dataclass(frozen=True)
class FrontConfig:
    # (method, path pattern) the media app answers; anything else: 404/405
    routes: tuple[tuple[str, str], ...]
    auth: AuthConfig
    rate_limit: RateLimitConfig
    max_body_bytes: int
    max_sdp_bytes: int
    max_pixels: int
    header_timeout_s: float
    body_timeout_s: float
    log_level: str = "INFO"
    nice: int = 5
    cpus: tuple[int, ...] = ()  # the CPUs it may run on; () = wherever the media process may
    report_interval_s: float = 1.0  # how often reject counts go back to the media process's monitor
    tls: TlsConfig | None = None  # HTTPS on the public port: the front terminates it
    cors: CorsConfig = field(default_factory=CorsConfig)  # its own refusals carry them too (http.cors)
    cors_request_headers: tuple[str, ...] = ()  # request headers allowed beyond the standard three

    def __post_init__(self) -> None:
        if not 0 <= self.nice <= 19:
            raise ValueError(f"front nice must be 0..19, got {self.nice}")
        if any(c < 0 for c in self.cpus):
            raise ValueError(f"front cpus must be CPU numbers, got {self.cpus}")


def front_config(config: GatewayConfig, routes: tuple[tuple[str, str], ...]) -> FrontConfig:
    return FrontConfig(
        routes=routes,
        auth=config.auth,
        rate_limit=config.rate_limit,
        max_body_bytes=config.max_body_bytes,
        max_sdp_bytes=config.max_sdp_bytes,
        max_pixels=config.sources.max_pixels,
        header_timeout_s=config.header_timeout_s,
        body_timeout_s=config.body_timeout_s,
        log_level=config.log_level,
        nice=config.front_nice,
        cpus=config.front_cpus,
        tls=config.tls,
        cors=config.cors,
        cors_request_headers=_egress_token_header(),
    )


def _egress_token_header() -> tuple[str, ...]:
    from gateway.http.egress import TOKEN_HEADER  # in the media process: the front never imports egress

    return (TOKEN_HEADER,)
