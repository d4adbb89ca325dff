"""One answer sequence for every offer the gateway takes (a publisher's WHIP, a viewer's WHEP).

The offer is made answerable (offer_rules), set, then the answer is shaped before aiortc writes it: the
DTLS version and handshake timing for a peer that needs its own (interop.dtls_peers), one video codec,
transport-cc kept where offered. The caller attaches its tracks in `attach` (the publisher's return video
and audio, or a viewer's), and the audio m-lines aiortc cannot answer are put back as the offer had them.
"""

from __future__ import annotations

from collections.abc import Callable

from aiortc import RTCPeerConnection, RTCSessionDescription

from gateway.webrtc.congestion.transport_cc import answer_transport_cc
from gateway.webrtc.interop.dtls import use_legacy_dtls, wait_before_handshake
from gateway.webrtc.interop.dtls_peers import handshake_grace_s, legacy_dtls_peer
from gateway.webrtc.negotiation.offer_rules import make_answerable, restore_unusable_audio
from gateway.webrtc.negotiation.sdp import OfferSummary
from gateway.webrtc.negotiation.video_codecs import answer_video_codec


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
    legacy_peer = legacy_dtls_peer(offer_sdp) if legacy_dtls is None else None
    if legacy_dtls:
        legacy_peer = "a publisher that asked for it (?dtls=1.0)"
    if legacy_peer is not None:
        use_legacy_dtls(pc, legacy_peer)
    grace = handshake_grace_s(offer_sdp)
    if grace > 0:
        wait_before_handshake(pc, grace)
    answer_video_codec(pc, offer.codec)
    attach(answer_transport_cc(pc) if transport_cc else 0)
    await pc.setLocalDescription(await pc.createAnswer())
    return restore_unusable_audio(pc.localDescription.sdp, offer.structure)
