"""Every private aiortc (and aioice) name the extensions use, and the one version check.

The extensions reach into aiortc where it offers no public hook; each name below was checked against the
aiortc releases in `CHECKED_AIORTC`. `supported()` is asked before anything is changed: on another release an
extension changes nothing and says so (it returns its "not installed" value, or refuses with one line where
going on unchanged would be unsafe). Name-mangled attributes are spelled out as Python stores them.
"""

from __future__ import annotations

import logging

import aiortc

logger = logging.getLogger(__name__)

CHECKED_AIORTC: tuple[tuple[int, int], tuple[int, int]] = ((1, 14), (1, 16))

# RTCPeerConnection
PC_CREATE_TRANSCEIVER = "_RTCPeerConnection__createTransceiver"
PC_CREATE_DTLS_TRANSPORT = "_RTCPeerConnection__createDtlsTransport"
PC_CERTIFICATES = "_RTCPeerConnection__certificates"

# RTCRtpTransceiver
TRANSCEIVER_CODECS = "_codecs"
TRANSCEIVER_HEADER_EXTENSIONS = "_headerExtensions"
TRANSCEIVER_OFFER_DIRECTION = "_offerDirection"

# RTCRtpReceiver
RECEIVER_JITTER_BUFFER = "_RTCRtpReceiver__jitter_buffer"
RECEIVER_RTCP_SSRC = "_RTCRtpReceiver__rtcp_ssrc"
RECEIVER_TIMESTAMP_MAPPER = "_RTCRtpReceiver__timestamp_mapper"
RECEIVER_SEND_RTCP_NACK = "_send_rtcp_nack"
RECEIVER_HANDLE_RTP_PACKET = "_handle_rtp_packet"

# aiortc.rtcrtpreceiver: the decoder factory each receiver asks (a module name, process-wide)
RECEIVER_MODULE = "aiortc.rtcrtpreceiver"
RECEIVER_GET_DECODER = "get_decoder"

# RTCRtpSender
SENDER_ENCODER = "_RTCRtpSender__encoder"
SENDER_RTP_HISTORY = "_RTCRtpSender__rtp_history"
SENDER_RTP_TIMESTAMP = "_RTCRtpSender__rtp_timestamp"
SENDER_LSR = "_RTCRtpSender__lsr"
SENDER_NEXT_ENCODED_FRAME = "_next_encoded_frame"
SENDER_RETRANSMIT = "_retransmit"
SENDER_SEND_KEYFRAME = "_send_keyframe"
SENDER_SSRC = "_ssrc"
SENDER_RTX_SSRC = "_rtx_ssrc"

# RTCRtpSender and RTCRtpReceiver alike
SEND_RTCP = "_send_rtcp"
HANDLE_RTCP_PACKET = "_handle_rtcp_packet"

# RTCDtlsTransport, RTCCertificate
DTLS_DO_HANDSHAKE = "_do_handshake"
DTLS_SET_STATE = "_set_state"
DTLS_SET_ROLE = "_set_role"
DTLS_ROLE = "_role"
DTLS_SSL = "_ssl"
DTLS_SEND_RTP = "_send_rtp"
DTLS_HANDLE_RTCP_DATA = "_handle_rtcp_data"
DTLS_HEADER_EXTENSIONS_MAP = "_rtp_header_extensions_map"
CERTIFICATE_SSL_CONTEXT = "_create_ssl_context"

# RTCIceTransport: the datagram sender its DTLS transport writes through (an instance attribute)
ICE_TRANSPORT_SEND = "_send"

# JitterBuffer, RtpPacket, RemoteStreamTrack, the timestamp mapper
JITTER_ORIGIN = "_origin"
JITTER_IS_VIDEO = "_is_video"
JITTER_PACKETS = "_packets"
PACKET_PAYLOAD = "_data"
TRACK_QUEUE = "_queue"
MAPPER_ORIGIN = "_origin"

# aioice: the ICE gatherer's connection and its sockets (its `get_component_candidates`, `sendto` and
# `data_received` are public methods, wrapped on one connection)
GATHERER_CONNECTION = "_connection"
CONNECTION_PROTOCOLS = "_protocols"


def aiortc_version() -> tuple[int, int]:
    """aiortc's (major, minor); (0, 0) when it cannot be read."""
    parts = str(getattr(aiortc, "__version__", "0.0")).split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return 0, 0


def supported() -> bool:
    """Whether the installed aiortc is one the private names above were checked against."""
    return CHECKED_AIORTC[0] <= aiortc_version() <= CHECKED_AIORTC[1]


def refused(extension: str) -> bool:
    """True (and one warning) when `extension` must not touch this aiortc; False when it may."""
    if supported():
        return False
    low, high = CHECKED_AIORTC
    logger.warning(
        "aiortc %s.%s is not one %s was checked against (%s.%s-%s.%s): left as aiortc made it",
        *aiortc_version(),
        extension,
        *low,
        *high,
    )
    return True
