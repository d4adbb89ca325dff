"""One answer sequence for every offer the gateway takes (a publisher's WHIP, a viewer's WHEP).

The offer is made answerable (offer_rules), set, then the answer is shaped before aiortc writes it
(`gateway.webrtc.install.install_answer`: the DTLS version and handshake timing for a peer that needs its
own, one video codec, transport-cc kept where offered). The caller attaches its tracks in `attach` (the
publisher's return video and audio, or a viewer's), and the audio m-lines aiortc cannot answer are put
back as the offer had them.
"""

from __future__ import annotations

from collections.abc import Callable

from aiortc import RTCPeerConnection, RTCSessionDescription

from gateway.webrtc.install import install_answer
from gateway.webrtc.negotiation.offer_rules import make_answerable, restore_unusable_audio
from gateway.webrtc.negotiation.sdp import OfferSummary


async def answer_offer(
    pc: RTCPeerConnection,
    offer_sdp: str,
    offer: OfferSummary,
    *,
    transport_cc: bool,
    attach: Callable[[int], None],
    legacy_dtls: bool | None = None,
) -> str:
    """The SDP answer to `offer_sdp` (already checked into `offer`). `attach(transport_cc_lines)` runs
    after the offer is set and before the answer is made; it gets how many video m-lines kept transport-cc
    (0 when `transport_cc` is off). `legacy_dtls`: None decides by the offer (interop.dtls_peers), True and
    False are the publisher's `?dtls=1.0` / `?dtls=1.2`."""
    await pc.setRemoteDescription(
        RTCSessionDescription(sdp=make_answerable(offer_sdp, offer.structure), type="offer")
    )
    attach(install_answer(pc, offer_sdp, offer.codec, transport_cc=transport_cc, legacy_dtls=legacy_dtls))
    await pc.setLocalDescription(await pc.createAnswer())
    return restore_unusable_audio(pc.localDescription.sdp, offer.structure)
