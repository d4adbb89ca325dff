"""Checks on a WHIP/WHEP offer before it reaches aiortc, so bad input gets a one-line 400 and never a 500.

aiortc's parser raises assorted exceptions (ValueError, KeyError, IndexError...) on malformed text and accepts
offers WHIP must refuse (no video, no BUNDLE). `check_offer` turns all of that into one `SdpError(reason)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiortc.sdp import SessionDescription

from gateway.webrtc.negotiation.offer_rules import (
    OfferRuleError,
    OfferStructure,
    check_candidate,
    check_structure,
)

MAX_SDP_BYTES = 64 * 1024


class SdpError(ValueError):
    """The offer is malformed or asks for something the gateway does not do; str() is a one-line reason."""


# Video codecs the gateway answers with, in preference order. VP8 first (every browser has it, cheapest to
# encode here); H.264 for publishers that offer nothing else (OBS's WHIP output, many hardware encoders).
SUPPORTED_VIDEO_CODECS: tuple[str, ...] = ("VP8", "H264")


@dataclass(frozen=True)
class OfferSummary:
    video_directions: tuple[str, ...]
    video_codecs: tuple[str, ...]
    has_audio: bool
    structure: OfferStructure = field(default_factory=lambda: OfferStructure((), ()))

    @property
    def codec(self) -> str:
        """The codec the answer uses: the first of SUPPORTED_VIDEO_CODECS that the offer has."""
        return next(c for c in SUPPORTED_VIDEO_CODECS if c in self.video_codecs)


@dataclass(frozen=True)
class TrickleFragment:
    """An `application/trickle-ice-sdpfrag` body (RFC 8840) as WHIP's PATCH carries it (RFC 9725 §4.3)."""

    ufrag: str | None
    pwd: str | None
    candidates: tuple[tuple[str | None, str], ...]  # (mid, candidate attribute value without "candidate:")
    end_of_candidates: bool


def parse_trickle_fragment(body: str) -> TrickleFragment:
    """Parse a trickle-ICE SDP fragment; SdpError (one line) when it is not one."""
    if len(body) > MAX_SDP_BYTES:
        raise SdpError("SDP fragment too large")
    ufrag = pwd = None
    mid: str | None = None
    candidates: list[tuple[str | None, str]] = []
    end = False
    for raw in body.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("a=ice-ufrag:"):
            ufrag = line.split(":", 1)[1]
        elif line.startswith("a=ice-pwd:"):
            pwd = line.split(":", 1)[1]
        elif line.startswith("a=mid:"):
            mid = line.split(":", 1)[1]
        elif line.startswith("a=candidate:"):
            value = line.split(":", 1)[1]
            try:
                check_candidate(value)
            except OfferRuleError as exc:
                raise SdpError(str(exc)) from None
            candidates.append((mid, value))
        elif line == "a=end-of-candidates":
            end = True
        elif not (line.startswith("m=") or line.startswith("a=") or line.startswith("c=")):
            raise SdpError(f"not an SDP fragment line: {line[:80]}")
    return TrickleFragment(ufrag, pwd, tuple(candidates), end)


def check_offer(sdp: str, *, need_send: bool) -> OfferSummary:
    """Validate an SDP offer. need_send: the client must send video (WHIP); else it must receive it (WHEP)."""
    if not sdp.strip():
        raise SdpError("empty SDP offer")
    if len(sdp) > MAX_SDP_BYTES:
        raise SdpError("SDP offer too large")
    if not sdp.lstrip().startswith("v=0"):
        raise SdpError("not an SDP offer (must start with v=0)")
    try:
        structure = check_structure(sdp)
    except OfferRuleError as exc:
        raise SdpError(str(exc)) from None
    try:
        parsed = SessionDescription.parse(sdp)
        str(parsed)  # aiortc writes the offer back later (remoteDescription): fail now, not on a PATCH
    except Exception as exc:  # aiortc's parser raises many types on garbage; all mean "malformed"
        raise SdpError(f"malformed SDP: {type(exc).__name__}") from None
    video = [m for m in parsed.media if m.kind == "video"]
    if not video:
        raise SdpError("SDP offer has no video m-line")
    if not any(g.semantic == "BUNDLE" for g in parsed.group):
        raise SdpError("SDP offer has no BUNDLE group (WHIP requires max-bundle)")
    for m in parsed.media:
        if m.ice is None or not m.ice.usernameFragment or not m.ice.password:
            raise SdpError("SDP offer lacks ICE credentials")
        if m.dtls is None or not m.dtls.fingerprints:
            raise SdpError("SDP offer lacks a DTLS fingerprint")
    directions = tuple(m.direction or "sendrecv" for m in video)
    wanted = ("sendrecv", "sendonly") if need_send else ("sendrecv", "recvonly")
    if not any(d in wanted for d in directions):
        raise SdpError(
            f"SDP video direction {directions[0]} not usable here (need one of {', '.join(wanted)})"
        )
    codecs = tuple(c.mimeType.split("/")[-1].upper() for m in video for c in m.rtp.codecs)
    if not any(c in codecs for c in SUPPORTED_VIDEO_CODECS):
        offered = ", ".join(sorted(set(codecs) - {"RTX", "RED", "ULPFEC", "FLEXFEC-03"})) or "none"
        raise SdpError(f"SDP offer has no VP8 or H264 video (offered: {offered})")
    return OfferSummary(
        video_directions=directions,
        video_codecs=codecs,
        has_audio=any(m.kind == "audio" for m in parsed.media),
        structure=structure,
    )
