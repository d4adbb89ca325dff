"""Reads and small writes of aiortc state that has no public accessor, for code outside this package.

The frame path drains a track's decoded-frame queue and routes a sender's keyframe requests to the encoder
that feeds it; the load generator reads negotiated codecs and places its own encoder. Each goes through the
names in `compat` and does nothing (returns None / False) on an aiortc they were not checked against.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiortc import MediaStreamTrack, RTCRtpSender, RTCRtpTransceiver
from aiortc.rtcrtpparameters import RTCRtpCodecParameters

from gateway.webrtc import compat
from gateway.webrtc.patches import sender as patched_sender

KEYFRAME_LAYER = "keyframe requests to the encoder"


def decoded_queue(track: MediaStreamTrack) -> asyncio.Queue[Any] | None:
    """A remote track's queue of decoded frames (None: unknown internals, nothing can be drained)."""
    if not compat.supported():
        return None
    queue = getattr(track, compat.TRACK_QUEUE, None)
    return queue if isinstance(queue, asyncio.Queue) else None


def route_keyframe_requests(sender: RTCRtpSender, request: Callable[[], None]) -> bool:
    """PLI/FIR that reach `sender` call `request()` (a sender of encoded packets cannot make a keyframe)."""
    if compat.refused("keyframe requests to the encoder") or not hasattr(sender, compat.SENDER_SEND_KEYFRAME):
        return False
    patched_sender.replace_keyframe_request(sender, KEYFRAME_LAYER, request)
    return True


def negotiated_codecs(transceiver: RTCRtpTransceiver) -> list[RTCRtpCodecParameters]:
    """The codecs the transceiver negotiated, preferred first ([] when unknown)."""
    if not compat.supported():
        return []
    return list(getattr(transceiver, compat.TRANSCEIVER_CODECS, None) or [])


def sender_encoder(sender: RTCRtpSender) -> Any | None:
    """The encoder a sender made on its first frame (None before, or when unknown)."""
    return getattr(sender, compat.SENDER_ENCODER, None) if compat.supported() else None


def place_sender_encoder(sender: RTCRtpSender, encoder: Any) -> bool:
    """Give `sender` the encoder it would otherwise make on its first frame."""
    if compat.refused("a sender's own encoder"):
        return False
    patched_sender.place_encoder(sender, encoder)
    return True


def header_extensions_map(receiver: Any) -> Any | None:
    """The header-extension map a receiver's transport parses RTP with (None when unknown)."""
    if not compat.supported() or receiver is None:
        return None
    return getattr(receiver.transport, compat.DTLS_HEADER_EXTENSIONS_MAP, None)
