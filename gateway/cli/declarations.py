"""Every gateway option, once, in the groups `gateway --help` and the example TOML show.

An option's default is its field's value in `product_defaults()` (gateway.cli.option): change a default in
its dataclass, and --help, the example file and the loader follow.
"""

from __future__ import annotations

from types import MappingProxyType

from gateway.cli.decl_media import MEDIA, MODELS, NETWORK
from gateway.cli.decl_service import EGRESS, LIMITS, MONITORING, SECURITY
from gateway.cli.option import Option

GROUPS = MappingProxyType(
    {
        "network": "where the gateway listens and how media reaches it",
        "media": "what a session does to its video and audio",
        "models": "which models run, and on what",
        "limits": "how much the gateway takes on, and how long it waits",
        "security": "who may do what, and over what",
        "egress and webhooks": "pushing processed streams into the platform's media servers; signed events",
        "monitoring": "what the gateway records and reports",
    }
)

CONFIG = Option(
    "config",
    "",
    "TOML file with the same keys as the flags (LIVEFUSE_* and flags override it)",
    kind="path",
    unset="$LIVEFUSE_CONFIG",
    in_file=False,
)

OPTIONS: tuple[Option, ...] = (CONFIG, *NETWORK, *MEDIA, *MODELS, *LIMITS, *SECURITY, *EGRESS, *MONITORING)
