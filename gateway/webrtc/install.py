"""Every extension of aiortc, installed from here in one fixed order; nothing else patches aiortc.

What each layer does lives in its feature module (congestion, recovery, codecs, interop, negotiation, sync),
which wraps the aiortc method it changes itself, through `chain` with a name from `compat`. This module
decides when and in which order: 1 the decoder factory (`install_decoders`), 2 the connection (`install`),
3 the answer (`install_answer`), 4 and 5 the publisher's receivers (`install_video_receiver`,
`install_transport_cc_receiver`, `tap_video_reports`, `tap_audio`), 6 the senders (`install_sender`,
`install_sender_clock`); each function's docstring gives its step's order. A later layer wraps an earlier
one: on a method carrying two, the later runs first (outermost). `chain.layers` reads the order back on a
live object, `chain.hook_keys` the hooks on a connection's factories.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiortc import RTCPeerConnection, RTCRtpReceiver, RTCRtpSender

from gateway.webrtc import chain, compat
from gateway.webrtc.codecs.hw_decode import DecoderChoice, install_hardware_decode
from gateway.webrtc.congestion import transport_cc, uplink_feedback
from gateway.webrtc.congestion.queue_delay import OneWayDelay
from gateway.webrtc.congestion.retransmit_budget import RetransmitBudget
from gateway.webrtc.congestion.retransmit_limit import limit_retransmissions
from gateway.webrtc.congestion.send_history import FeedbackSample
from gateway.webrtc.congestion.sender_feedback import route_keyframe_requests, watch_sender_feedback
from gateway.webrtc.congestion.transport_cc import SendSideFeedback, answer_transport_cc, install_send_side
from gateway.webrtc.congestion.uplink_rate import UplinkRateConfig
from gateway.webrtc.interop.dtls import DtlsWatch, use_legacy_dtls, wait_before_handshake, watch_dtls
from gateway.webrtc.interop.dtls_peers import handshake_grace_s, legacy_dtls_peer
from gateway.webrtc.interop.dtls_retransmit import RETRANSMIT_MARK, RetransmitSchedule, retransmit_flights
from gateway.webrtc.interop.host_ports import PortRange
from gateway.webrtc.interop.ice import IceConfig, configure_gathering, rtc_configuration
from gateway.webrtc.interop.link import MARK as LINK_MARK
from gateway.webrtc.interop.link import Admit, delay_datagrams
from gateway.webrtc.negotiation.video_codecs import answer_video_codec
from gateway.webrtc.recovery.jitter_buffer import apply_low_latency_receive, measure_transit
from gateway.webrtc.sync.sender_clock import StampState, stamp_sender_reports
from gateway.webrtc.sync.taps import PacketCallback, ReportCallback, tap_audio_packets, tap_sender_reports


# --- 1. decoder factory -----------------------------------------------------------------------------------
def install_decoders(choice: DecoderChoice, on_fallback: Callable[[str], None]) -> Callable[[], None]:
    """Step 1, once per process at app start: new receivers decode with `choice`'s hardware decoders
    (codecs.hw_decode, on aiortc's `get_decoder`, only where a hardware decoder opened); returns the undo,
    run at shutdown. A no-op (and a no-op undo) when every codec decodes in software."""
    if not choice.hardware:
        return lambda: None
    return install_hardware_decode(choice, on_fallback)


# --- 2. connection ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Features:
    """What `install` applies to a connection."""

    host_addresses: tuple[str, ...] = ()  # empty: aioice's own choice
    dscp: int | None = None
    low_latency_receive: bool = True
    dtls_label: str | None = None  # watch DTLS under this name in the log; None: stock DTLS
    udp_ports: PortRange | None = None  # host candidates within this UDP port range
    public_address: str | None = None  # host candidates announced at this address
    dtls_retransmit: RetransmitSchedule | None = None  # with the DTLS watch; None: OpenSSL's timer alone

    @classmethod
    def of(
        cls,
        ice: IceConfig,
        *,
        low_latency_receive: bool = True,
        dtls_label: str | None = None,
        dtls_retransmit: RetransmitSchedule | None = None,
    ) -> Features:
        return cls(
            ice.host_addresses,
            ice.dscp,
            low_latency_receive,
            dtls_label,
            ice.udp_ports,
            ice.public_address,
            dtls_retransmit,
        )


@dataclass(frozen=True)
class Installed:
    low_latency_receive: bool
    dtls: DtlsWatch | None


def install(pc: RTCPeerConnection, features: Features) -> Installed:
    """Step 2, when the connection is made: its DTLS-transport factory calls, in this order,
    a. interop.ice host addresses, port range and DSCP (the ICE connection's gathering),
    b. interop.dtls the DTLS watch (certificates' SSL context and fingerprints; the handshake and state),
       then interop.dtls_retransmit on the handshake, outside the watch (its layer runs first): the first
       flight resent on its schedule while the peer says nothing, long before OpenSSL's 1 s timer,
    c. interop.link an impaired link, for the load generator only (`install_link`, after a and b);
    its transceiver factory gives every video receiver recovery's marker-release jitter buffer and NACK
    filter (recovery.jitter_buffer)."""
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
    schedule = features.dtls_retransmit
    if dtls is not None and dtls.patched and schedule is not None:

        def resend_flights(transport: Any) -> None:
            retransmit_flights(transport, schedule)

        chain.on_dtls_transports(pc, RETRANSMIT_MARK, resend_flights)
    return Installed(low_latency, dtls)


def create_peer_connection(config: IceConfig, *, low_latency_receive: bool = True) -> RTCPeerConnection:
    """A peer connection with explicit ICE servers, the configured host addresses, marker-release receive."""
    pc = RTCPeerConnection(configuration=rtc_configuration(config))
    install(pc, Features.of(config, low_latency_receive=low_latency_receive))
    return pc


def open_peer_connection(
    config: IceConfig, label: str, dtls_retransmit: RetransmitSchedule | None = None
) -> tuple[RTCPeerConnection, DtlsWatch]:
    """The gateway's own peer connections: every connection extension, DTLS watched under `label`, its
    flights resent on `dtls_retransmit` (None: the default schedule)."""
    pc = RTCPeerConnection(configuration=rtc_configuration(config))
    schedule = dtls_retransmit if dtls_retransmit is not None else RetransmitSchedule()
    installed = install(pc, Features.of(config, dtls_label=label, dtls_retransmit=schedule))
    assert installed.dtls is not None
    return pc, installed.dtls


def install_link(pc: RTCPeerConnection, outgoing: Admit | None, incoming: Admit | None) -> None:
    """Every datagram `pc` sends through `outgoing`, every one it receives through `incoming` (interop.link;
    None: that direction untouched, both None: nothing installed). Before `setLocalDescription`, on the event
    loop. RuntimeError on an aiortc without the per-connection hook: an unimpaired link when an impaired one
    was asked for would measure the wrong network."""
    if not compat.supported() or not hasattr(pc, compat.PC_CREATE_DTLS_TRANSPORT):
        raise RuntimeError("this aiortc version has no per-connection transport hook; cannot impair")
    if outgoing is None and incoming is None:
        return
    key = object()
    chain.on_dtls_transports(
        pc, LINK_MARK, lambda transport: delay_datagrams(transport, key, outgoing, incoming)
    )


# --- 3. the answer ----------------------------------------------------------------------------------------
def install_answer(
    pc: RTCPeerConnection, offer_sdp: str, codec: str, *, transport_cc: bool, legacy_dtls: bool | None
) -> int:
    """Step 3, after the offer is set: legacy DTLS and the handshake grace for the peers that need them
    (interop.dtls_peers), one video codec, transport-cc kept where offered. Returns the video m-lines that
    kept transport-cc (0 when `transport_cc` is off). `legacy_dtls`: None decides by the offer
    (interop.dtls_peers), True and False are the publisher's `?dtls=1.0` / `?dtls=1.2`."""
    legacy_peer = legacy_dtls_peer(offer_sdp) if legacy_dtls is None else None
    if legacy_dtls:
        legacy_peer = "a publisher that asked for it (?dtls=1.0)"
    if legacy_peer is not None:
        use_legacy_dtls(pc, legacy_peer)
    grace = handshake_grace_s(offer_sdp)
    if grace > 0:
        wait_before_handshake(pc, grace)
    answer_video_codec(pc, codec)
    return answer_transport_cc(pc) if transport_cc else 0


# --- 4, 5. the publisher's receivers ----------------------------------------------------------------------
def install_video_receiver(
    receiver: RTCRtpReceiver, uplink: UplinkRateConfig, transit: OneWayDelay
) -> uplink_feedback.UplinkFeedback | None:
    """Step 4, the publisher's video receiver when its track arrives: the uplink's `transit` measured on the
    marker buffer, then the uplink REMB cap on `_send_rtcp` (congestion.uplink_feedback); the cap (None
    where none was installed)."""
    measure_transit(receiver, transit)
    return uplink_feedback.install(receiver, uplink, transit)


def install_transport_cc_receiver(pc: RTCPeerConnection) -> transport_cc.TransportCcFeedback | None:
    """Step 5, while the answer is shaped: transport-cc's recorder on the video receiver's
    `_handle_rtp_packet` (its feedback leaves through step 4's `_send_rtcp`, looked up at each send)."""
    receiver = next((t.receiver for t in pc.getTransceivers() if t.kind == "video"), None)
    return transport_cc.install(receiver) if receiver is not None else None


def tap_video_reports(receiver: RTCRtpReceiver, on_report: ReportCallback) -> bool:
    """Step 5: the sender-report tap on the video receiver's `_handle_rtcp_packet`, the publisher's video
    sender reports to `on_report` (its stated A/V relation)."""
    return tap_sender_reports(receiver, on_report)


def tap_audio(receiver: RTCRtpReceiver, on_packet: PacketCallback, on_report: ReportCallback) -> bool:
    """Step 5, on the Opus receiver: the packet tap in place of its jitter buffer (the publisher's Opus
    packets to `on_packet` instead of the decoder), then the sender-report tap (to `on_report`). False
    (nothing changed): the audio cannot be relayed."""
    if tap_audio_packets(receiver, on_packet) is None:
        return False
    tap_sender_reports(receiver, on_report)
    return True


# --- 6. senders -------------------------------------------------------------------------------------------
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
    """Step 6, a sender of the processed video, after the offer is set: a keyframe requests to the encoder
    (`_send_keyframe`), b congestion.sender_feedback (`_handle_rtcp_packet`, and the inner `_send_rtcp`),
    c congestion.retransmit_limit (`_retransmit`), d sync.sender_clock (`_next_encoded_frame`, and the
    outer `_send_rtcp`: b records each report as d rewrote it; `stamp_reports(sender)` is d, the caller's
    `install_sender_clock` with its capture clock), e transport-cc's send side on its DTLS transport
    (`_send_rtp`, `_handle_rtcp_data`). Returns the transport-cc side, if any."""
    route_keyframe_requests(sender, feedback.request_keyframe)
    watch_sender_feedback(sender, feedback.on_remb, feedback.on_loss, feedback.on_rtt)
    limit_retransmissions(
        sender, feedback.retransmits, feedback.rate_bps, feedback.rtt_s, feedback.request_keyframe
    )
    stamp_reports(sender)
    return install_send_side(pc, sender, feedback.on_transit) if transport_cc else None


def install_sender_clock(sender: RTCRtpSender, capture_ntp: Callable[[int], int | None]) -> StampState | None:
    """Step 6d: `sender`'s reports carry the capture time of their media (sync.sender_clock); an audio
    sender gets this step alone."""
    return stamp_sender_reports(sender, capture_ntp)
