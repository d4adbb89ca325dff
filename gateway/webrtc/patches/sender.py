"""RTCRtpSender: every layer the extensions put on one sender, and the encoder a sender would make.

`_send_rtcp` carries two layers, in the order `gateway.webrtc.install.install_sender` puts them: the
feedback watch inside (it records each sender report as it went out) and the capture-clock stamping
outside (it rewrites the report first). `_handle_rtcp_packet`, `_retransmit` and `_next_encoded_frame`
carry one layer each; `_send_keyframe` is replaced (a sender of encoded packets cannot make a keyframe).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiortc import RTCRtpSender

from gateway.webrtc import compat
from gateway.webrtc.patches import chain

Make = Callable[[Any], Callable[..., Any]]


def wrap_send_rtcp(sender: RTCRtpSender, layer: str, make: Make) -> None:
    chain.wrap(sender, compat.SEND_RTCP, layer, make)


def wrap_handle_rtcp_packet(sender: RTCRtpSender, layer: str, make: Make) -> None:
    chain.wrap(sender, compat.HANDLE_RTCP_PACKET, layer, make)


def wrap_retransmit(sender: RTCRtpSender, layer: str, make: Make) -> None:
    chain.wrap(sender, compat.SENDER_RETRANSMIT, layer, make)


def wrap_next_encoded_frame(sender: RTCRtpSender, layer: str, make: Make) -> None:
    chain.wrap(sender, compat.SENDER_NEXT_ENCODED_FRAME, layer, make)


def replace_keyframe_request(sender: RTCRtpSender, layer: str, request: Callable[[], None]) -> None:
    """PLI/FIR that reach `sender` call `request()` instead of aiortc's own encoder."""
    chain.wrap(sender, compat.SENDER_SEND_KEYFRAME, layer, lambda _stock: lambda: request())


def set_last_report(sender: RTCRtpSender, lsr: int) -> None:
    """The LSR aiortc matches receiver reports' round trips against (after a report was rewritten)."""
    setattr(sender, compat.SENDER_LSR, lsr)


def place_encoder(sender: RTCRtpSender, encoder: Any) -> None:
    """Give `sender` the encoder it would otherwise make on its first frame."""
    setattr(sender, compat.SENDER_ENCODER, encoder)
