"""RTCRtpTransceiver: the codecs and header extensions an answer is written from.

aiortc chooses a transceiver's codecs and header extensions when the offer is set and writes the answer
from them; the answer's rules (one video codec, Opus or inactive, transport-cc kept) change those lists.
"""

from __future__ import annotations

from typing import Any

from aiortc import RTCRtpTransceiver
from aiortc.rtcrtpparameters import RTCRtpCodecParameters, RTCRtpHeaderExtensionParameters

from gateway.webrtc import compat


def codecs(transceiver: RTCRtpTransceiver) -> list[RTCRtpCodecParameters] | None:
    """The codecs the answer will name (the list itself: a change to it is a change to the answer)."""
    return getattr(transceiver, compat.TRANSCEIVER_CODECS, None)  # type: ignore[no-any-return]


def set_codecs(transceiver: RTCRtpTransceiver, kept: list[RTCRtpCodecParameters]) -> None:
    setattr(transceiver, compat.TRANSCEIVER_CODECS, kept)


def header_extensions(transceiver: RTCRtpTransceiver) -> list[RTCRtpHeaderExtensionParameters] | None:
    """The header extensions the answer will name (the list itself)."""
    return getattr(transceiver, compat.TRANSCEIVER_HEADER_EXTENSIONS, None)  # type: ignore[no-any-return]


def offer_direction(transceiver: RTCRtpTransceiver) -> Any | None:
    return getattr(transceiver, compat.TRANSCEIVER_OFFER_DIRECTION, None)
