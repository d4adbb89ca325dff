"""The extensions, applied to one peer connection and its senders in a fixed order.

Connection (`install`, before any description): 1 interop.ice gathering and DSCP, 2 recovery's
marker-release buffer on every video receiver, 3 interop.dtls suites and failure reasons.
A sender of the processed video (`install_sender`, after the offer is set): 1 keyframe requests to the
encoder, 2 congestion.sender_feedback (the inner `_send_rtcp`), 3 congestion.retransmit_limit,
4 sync.sender_clock (the outer `_send_rtcp`, so 2 keys each report as it went out), 5 transport-cc.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiortc import RTCPeerConnection, RTCRtpSender

from gateway.webrtc.congestion.retransmit_budget import RetransmitBudget
from gateway.webrtc.congestion.retransmit_limit import limit_retransmissions
from gateway.webrtc.congestion.send_history import FeedbackSample
from gateway.webrtc.congestion.sender_feedback import watch_sender_feedback
from gateway.webrtc.congestion.transport_cc import SendSideFeedback, install_send_side
from gateway.webrtc.internals import route_keyframe_requests
from gateway.webrtc.interop.dtls import DtlsWatch, watch_dtls
from gateway.webrtc.interop.host_ports import PortRange
from gateway.webrtc.interop.ice import IceConfig, configure_gathering, rtc_configuration
from gateway.webrtc.recovery.jitter_buffer import apply_low_latency_receive


@dataclass(frozen=True)
class Features:
    """What `install` applies to a connection."""

    host_addresses: tuple[str, ...] = ()  # empty: aioice's own choice
    dscp: int | None = None
    low_latency_receive: bool = True
    dtls_label: str | None = None  # watch DTLS under this name in the log; None: stock DTLS
    udp_ports: PortRange | None = None  # host candidates within this UDP port range
    public_address: str | None = None  # host candidates announced at this address

    @classmethod
    def of(
        cls, ice: IceConfig, *, low_latency_receive: bool = True, dtls_label: str | None = None
    ) -> Features:
        return cls(
            ice.host_addresses, ice.dscp, low_latency_receive, dtls_label, ice.udp_ports, ice.public_address
        )


@dataclass(frozen=True)
class Installed:
    low_latency_receive: bool
    dtls: DtlsWatch | None


def install(pc: RTCPeerConnection, features: Features) -> Installed:
    """Apply `features` to `pc` in the order of the module docstring."""
    if (
        features.host_addresses
        or features.dscp is not None
        or features.udp_ports is not None
        or features.public_address is not None
    ):
        configure_gathering(
            pc, features.host_addresses, features.dscp, features.udp_ports, features.public_address
        )
    low_latency = apply_low_latency_receive(pc) if features.low_latency_receive else False
    dtls = watch_dtls(pc, features.dtls_label) if features.dtls_label is not None else None
    return Installed(low_latency, dtls)


def create_peer_connection(config: IceConfig, *, low_latency_receive: bool = True) -> RTCPeerConnection:
    """A peer connection with explicit ICE servers, the configured host addresses, marker-release receive."""
    pc = RTCPeerConnection(configuration=rtc_configuration(config))
    install(pc, Features.of(config, low_latency_receive=low_latency_receive))
    return pc


def open_peer_connection(config: IceConfig, label: str) -> tuple[RTCPeerConnection, DtlsWatch]:
    """The gateway's own peer connections: every connection extension, DTLS watched under `label`."""
    pc = RTCPeerConnection(configuration=rtc_configuration(config))
    installed = install(pc, Features.of(config, dtls_label=label))
    assert installed.dtls is not None
    return pc, installed.dtls


@dataclass(frozen=True)
class SenderFeedback:
    """Where one sender's feedback goes: the encoder that feeds it and its policies."""

    request_keyframe: Callable[[], None]
    on_remb: Callable[[float, float], None]  # (bps, now)
    on_loss: Callable[[float, float], None]  # (fraction lost, now)
    on_rtt: Callable[[float, float], None]  # (seconds, now)
    retransmits: RetransmitBudget
    rate_bps: Callable[[], float]
    rtt_s: Callable[[], float | None]
    on_transit: Callable[[FeedbackSample], None]  # transport-cc


def install_sender(
    pc: RTCPeerConnection,
    sender: RTCRtpSender,
    feedback: SenderFeedback,
    *,
    stamp_reports: Callable[[RTCRtpSender], Any],
    transport_cc: bool,
) -> SendSideFeedback | None:
    """Apply the sender extensions in the order of the module docstring; the transport-cc side, if any."""
    route_keyframe_requests(sender, feedback.request_keyframe)
    watch_sender_feedback(sender, feedback.on_remb, feedback.on_loss, feedback.on_rtt)
    limit_retransmissions(
        sender, feedback.retransmits, feedback.rate_bps, feedback.rtt_s, feedback.request_keyframe
    )
    stamp_reports(sender)
    return install_send_side(pc, sender, feedback.on_transit) if transport_cc else None
