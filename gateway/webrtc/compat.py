"""Every private aiortc (and aioice) name the extensions use, the one version check, and the one way to
read or write the private state behind those names.

The extensions reach into aiortc where it offers no public hook; each name below was checked against the
aiortc releases in `CHECKED_AIORTC`. `supported()` is asked before anything is changed: on another release an
extension changes nothing and says so (it returns its "not installed" value, or refuses with one line where
going on unchanged would be unsafe). Name-mangled attributes are spelled out as Python stores them. State is
read and written only through the functions at the end; a method is wrapped only through `chain`. The
functions for code outside this package (the frame path, the load generator) check the release themselves.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

import aiortc
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCRtpReceiver, RTCRtpSender, RTCRtpTransceiver
from aiortc.rtcrtpparameters import RTCRtpCodecParameters, RTCRtpHeaderExtensionParameters

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


# --- reads and writes of the state behind the names above -------------------------------------------------
# RTCPeerConnection
def certificates(pc: RTCPeerConnection) -> list[Any]:
    """The certificates `pc` offers its DTLS transports."""
    return list(getattr(pc, PC_CERTIFICATES))


# RTCRtpTransceiver: the lists an answer is written from (aiortc fills them when the offer is set)
def codecs(transceiver: RTCRtpTransceiver) -> list[RTCRtpCodecParameters] | None:
    """The codecs the answer will name (the list itself: a change to it is a change to the answer)."""
    return getattr(transceiver, TRANSCEIVER_CODECS, None)  # type: ignore[no-any-return]


def set_codecs(transceiver: RTCRtpTransceiver, kept: list[RTCRtpCodecParameters]) -> None:
    setattr(transceiver, TRANSCEIVER_CODECS, kept)


def header_extensions(transceiver: RTCRtpTransceiver) -> list[RTCRtpHeaderExtensionParameters] | None:
    """The header extensions the answer will name (the list itself)."""
    return getattr(transceiver, TRANSCEIVER_HEADER_EXTENSIONS, None)  # type: ignore[no-any-return]


def offer_direction(transceiver: RTCRtpTransceiver) -> Any | None:
    return getattr(transceiver, TRANSCEIVER_OFFER_DIRECTION, None)


def negotiated_codecs(transceiver: RTCRtpTransceiver) -> list[RTCRtpCodecParameters]:
    """The codecs the transceiver negotiated, preferred first ([] when unknown)."""
    if not supported():
        return []
    return list(codecs(transceiver) or [])


# RTCRtpReceiver
def jitter_buffer(receiver: RTCRtpReceiver | None) -> Any | None:
    """The receiver's jitter buffer (None when unknown)."""
    return getattr(receiver, RECEIVER_JITTER_BUFFER, None) if receiver is not None else None


def set_jitter_buffer(receiver: RTCRtpReceiver, buffer: Any) -> None:
    setattr(receiver, RECEIVER_JITTER_BUFFER, buffer)


def rtcp_ssrc(receiver: RTCRtpReceiver) -> int | None:
    """The SSRC the receiver's own RTCP goes out under (None when unknown)."""
    return getattr(receiver, RECEIVER_RTCP_SSRC, None)


def pts_origin(receiver: RTCRtpReceiver) -> Any | None:
    """What the receiver's timestamp mapper maps to pts 0 (None before the first frame, or unknown)."""
    return getattr(getattr(receiver, RECEIVER_TIMESTAMP_MAPPER, None), MAPPER_ORIGIN, None)


def receiver_module() -> ModuleType:
    """The module whose `RECEIVER_GET_DECODER` every new receiver asks for its decoder."""
    return importlib.import_module(RECEIVER_MODULE)


def header_extensions_map(receiver: Any) -> Any | None:
    """The header-extension map a receiver's transport parses RTP with (None when unknown)."""
    if not supported() or receiver is None:
        return None
    return getattr(receiver.transport, DTLS_HEADER_EXTENSIONS_MAP, None)


def decoded_queue(track: MediaStreamTrack) -> asyncio.Queue[Any] | None:
    """A remote track's queue of decoded frames (None: unknown internals, nothing can be drained)."""
    if not supported():
        return None
    queue = getattr(track, TRACK_QUEUE, None)
    return queue if isinstance(queue, asyncio.Queue) else None


# RTCRtpSender and RTCRtpReceiver alike
def send_rtcp(sender_or_receiver: Any) -> Callable[[Any], Awaitable[None]]:
    """Its RTCP send, as it is now (with every layer on it)."""
    return getattr(sender_or_receiver, SEND_RTCP)  # type: ignore[no-any-return]


# RTCRtpSender
def ssrc(sender: RTCRtpSender) -> int:
    return getattr(sender, SENDER_SSRC)  # type: ignore[no-any-return]


def media_ssrcs(sender: RTCRtpSender) -> set[Any]:
    """The sender's SSRC and its RTX SSRC, those it has."""
    return {getattr(sender, name, None) for name in (SENDER_SSRC, SENDER_RTX_SSRC)} - {None}


def rtp_history(sender: RTCRtpSender) -> Any | None:
    """The packets the sender keeps for retransmission, by sequence number modulo its size (None: unknown)."""
    return getattr(sender, SENDER_RTP_HISTORY, None)


def rtp_timestamp(sender: RTCRtpSender) -> int:
    """The RTP timestamp of the frame the sender sent last (aiortc's random origin added)."""
    return getattr(sender, SENDER_RTP_TIMESTAMP)  # type: ignore[no-any-return]


def set_last_report(sender: RTCRtpSender, lsr: int) -> None:
    """The LSR aiortc matches receiver reports' round trips against (after a report was rewritten)."""
    setattr(sender, SENDER_LSR, lsr)


def sender_encoder(sender: RTCRtpSender) -> Any | None:
    """The encoder a sender made on its first frame (None before, or when unknown)."""
    return getattr(sender, SENDER_ENCODER, None) if supported() else None


def place_sender_encoder(sender: RTCRtpSender, encoder: Any) -> bool:
    """Give `sender` the encoder it would otherwise make on its first frame (False: unknown release)."""
    if refused("a sender's own encoder"):
        return False
    setattr(sender, SENDER_ENCODER, encoder)
    return True


# RTCDtlsTransport, and the ICE transport and aioice connection under it
def dtls_connection(transport: Any) -> Any | None:
    """The transport's OpenSSL connection (None when unknown)."""
    return getattr(transport, DTLS_SSL, None)


def dtls_role(transport: Any) -> str:
    """ "client" or "server" (or "auto" before the role is set)."""
    return getattr(transport, DTLS_ROLE)  # type: ignore[no-any-return]


def ice_send(ice_transport: Any) -> Callable[[bytes], Awaitable[None]] | None:
    """The datagram sender a DTLS transport writes through (None when unknown)."""
    return getattr(ice_transport, ICE_TRANSPORT_SEND, None)


def ice_connection(dtls_transport: Any) -> Any:
    """The aioice connection a DTLS transport runs over."""
    return getattr(dtls_transport.transport.iceGatherer, GATHERER_CONNECTION)


def gathered_sockets(connection: Any) -> list[Any]:
    """The sockets an aioice connection gathered (host and relay)."""
    found = []
    for protocol in getattr(connection, CONNECTION_PROTOCOLS, ()):
        transport = getattr(protocol, "transport", None)
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is not None:
            found.append(sock)
    return found


# JitterBuffer, RtpPacket
def jitter_origin(buffer: Any) -> int | None:
    """The sequence number the buffer's first slot holds (None: it holds no packet)."""
    return getattr(buffer, JITTER_ORIGIN)  # type: ignore[no-any-return]


def jitter_buffer_unused(buffer: Any) -> bool:
    """Whether the buffer has taken no packet yet (False too when its state is unknown)."""
    return getattr(buffer, JITTER_ORIGIN, 0) is None


def jitter_is_video(buffer: Any) -> bool:
    return bool(getattr(buffer, JITTER_IS_VIDEO, False))


def packet_payload(packet: Any) -> bytes:
    """The depayloaded bytes aiortc's receiver stored on a packet for its jitter buffer."""
    return getattr(packet, PACKET_PAYLOAD)  # type: ignore[no-any-return]
