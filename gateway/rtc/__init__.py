"""WebRTC helpers shared by the gateway and the load generator (receive latency, ICE host addresses, SDP)."""

from gateway.rtc.ice import (
    IceConfig,
    TurnServer,
    configure_gathering,
    create_peer_connection,
    restrict_host_addresses,
    rtc_configuration,
)
from gateway.rtc.receive import MarkerJitterBuffer, apply_low_latency_receive, frame_completed_at

__all__ = [
    "IceConfig",
    "MarkerJitterBuffer",
    "TurnServer",
    "apply_low_latency_receive",
    "configure_gathering",
    "create_peer_connection",
    "frame_completed_at",
    "restrict_host_addresses",
    "rtc_configuration",
]
