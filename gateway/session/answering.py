"""One way to answer a publisher's or a viewer's offer, and to refuse it.

Any failure while answering (a cancelled request included) first gives back what the offer took (the
session slot, the viewer), shielded from the cancellation, then becomes a 400 that names the cause: a bad
offer never leaves a half-open peer behind or locks a publisher out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiortc import RTCPeerConnection

from gateway.errors import BadRequest
from gateway.webrtc.negotiation.answer import answer_offer
from gateway.webrtc.negotiation.sdp import OfferSummary

logger = logging.getLogger(__name__)


async def answer_or_refuse(
    pc: RTCPeerConnection,
    offer_sdp: str,
    offer: OfferSummary,
    *,
    transport_cc: bool,
    attach: Callable[[int], None],
    give_back: Callable[[], Awaitable[None]],
    what: str,
    legacy_dtls: bool | None = None,
) -> str:
    """The answer (webrtc.negotiation.answer_offer); on failure `give_back()` runs, then BadRequest."""
    try:
        return await answer_offer(
            pc, offer_sdp, offer, transport_cc=transport_cc, attach=attach, legacy_dtls=legacy_dtls
        )
    except BaseException as exc:
        await asyncio.shield(give_back())
        if not isinstance(exc, Exception):
            raise
        logger.info("%s refused: %s: %s", what, type(exc).__name__, exc)
        raise BadRequest(f"cannot answer {what}: {type(exc).__name__}: {exc}") from None
