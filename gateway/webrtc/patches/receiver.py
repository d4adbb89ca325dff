"""RTCRtpReceiver: every layer the extensions put on one receiver, and its jitter buffer.

The jitter buffer is replaced, not wrapped: by recovery's `MarkerJitterBuffer` on video (when the
connection is made) or by the audio relay's `PacketTap` on Opus (when the offer is answered); the uplink cap
and the transit measure then attach to the marker buffer. `_send_rtcp` carries the uplink REMB cap (the
transport-cc feedback goes out through it, looked up at each send); `_handle_rtp_packet` the transport-cc
recorder; `_handle_rtcp_packet` the sender-report tap; `_send_rtcp_nack` recovery's NACK filter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiortc import RTCRtpReceiver

from gateway.webrtc import compat
from gateway.webrtc.patches import chain

Make = Callable[[Any], Callable[..., Any]]


def jitter_buffer(receiver: RTCRtpReceiver | None) -> Any | None:
    """The receiver's jitter buffer (None when unknown)."""
    return getattr(receiver, compat.RECEIVER_JITTER_BUFFER, None) if receiver is not None else None


def replace_jitter_buffer(receiver: RTCRtpReceiver, buffer: Any) -> None:
    setattr(receiver, compat.RECEIVER_JITTER_BUFFER, buffer)


def wrap_send_rtcp(receiver: RTCRtpReceiver, layer: str, make: Make) -> None:
    chain.wrap(receiver, compat.SEND_RTCP, layer, make)


def wrap_handle_rtcp_packet(receiver: RTCRtpReceiver, layer: str, make: Make) -> None:
    chain.wrap(receiver, compat.HANDLE_RTCP_PACKET, layer, make)


def wrap_handle_rtp_packet(receiver: RTCRtpReceiver, layer: str, make: Make) -> None:
    chain.wrap(receiver, compat.RECEIVER_HANDLE_RTP_PACKET, layer, make)


def wrap_send_rtcp_nack(receiver: RTCRtpReceiver, layer: str, make: Make) -> None:
    chain.wrap(receiver, compat.RECEIVER_SEND_RTCP_NACK, layer, make)
