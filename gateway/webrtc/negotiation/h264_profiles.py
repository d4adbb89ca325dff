"""Answer H.264 with the profile the offer named, not aiortc's own spelling of it.

aiortc matches an offered format by profile (42c01f and 42e01f are both Constrained Baseline) and answers
with its own parameters; RFC 6184 8.2.2 wants the offered profile bytes kept, and a strict peer compares
them. The level: what we receive (3.1) when both sides allow level asymmetry, else the lower of the two.
`answer_profile_level_id` is pure; `keep_offered_h264_profiles` applies it to aiortc's negotiated codecs
before the answer is made (on an unchecked aiortc nothing changes).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from aiortc import RTCPeerConnection
from aiortc.rtcrtpparameters import RTCRtpCodecParameters
from aiortc.sdp import SessionDescription

from gateway.webrtc import compat

logger = logging.getLogger(__name__)

LOCAL_LEVEL_IDC = 0x1F  # level 3.1: what aiortc's capabilities (42001f / 42e01f) declare
_LEVEL_1B_IDC = 0x0B  # with constraint_set3 set in a Baseline profile, level_idc 11 means level 1b
_CONSTRAINT_SET3 = 0x10
_PROFILE_LEVEL_ID = re.compile(r"^[0-9a-fA-F]{6}$")


def _allows_asymmetry(parameters: Mapping[str, object]) -> bool:
    return str(parameters.get("level-asymmetry-allowed", "0")) == "1"


def _level_rank(profile_iop: int, level_idc: int) -> float:
    """Order levels; level 1b sits between 1.0 (idc 10) and 1.1 (idc 11)."""
    if level_idc == _LEVEL_1B_IDC and profile_iop & _CONSTRAINT_SET3:
        return 10.5
    return float(level_idc)


def answer_profile_level_id(
    offered: str,
    *,
    offer_allows_asymmetry: bool,
    local_level_idc: int = LOCAL_LEVEL_IDC,
    local_allows_asymmetry: bool = True,
) -> str:
    """The profile-level-id to answer an offered one with: the offered profile, the level per RFC 6184."""
    if not _PROFILE_LEVEL_ID.match(offered):
        raise ValueError(f"profile-level-id must be 6 hex digits, got {offered!r}")
    profile_idc, profile_iop, level_idc = (int(offered[i : i + 2], 16) for i in (0, 2, 4))
    if offer_allows_asymmetry and local_allows_asymmetry:
        answer_level = local_level_idc
    elif _level_rank(profile_iop, level_idc) <= _level_rank(0, local_level_idc):
        answer_level = level_idc
    else:
        answer_level = local_level_idc
    if level_idc == _LEVEL_1B_IDC and answer_level != _LEVEL_1B_IDC:
        profile_iop &= ~_CONSTRAINT_SET3 & 0xFF  # that bit meant "level 1b", not a constraint
    case = str.upper if offered.isupper() else str.lower
    return case(f"{profile_idc:02x}{profile_iop:02x}{answer_level:02x}")


def _offered_h264(sdp: str) -> dict[str, dict[int, RTCRtpCodecParameters]]:
    """mid -> payload type -> the offered H.264 codec."""
    offered: dict[str, dict[int, RTCRtpCodecParameters]] = {}
    for media in SessionDescription.parse(sdp).media:
        if media.kind == "video" and media.rtp.muxId:
            offered[media.rtp.muxId] = {
                c.payloadType: c
                for c in media.rtp.codecs
                if c.mimeType.lower() == "video/h264" and c.payloadType is not None
            }
    return offered


def keep_offered_h264_profiles(pc: RTCPeerConnection) -> int:
    """After `setRemoteDescription(offer)`, before `createAnswer()`: answer each H.264 format with the
    offered profile (see the module docstring). Returns how many formats were changed."""
    remote = pc.remoteDescription
    if remote is None or remote.type != "offer" or compat.refused("the H.264 profile answer"):
        return 0
    offered = _offered_h264(remote.sdp)
    changed = 0
    for transceiver in pc.getTransceivers():
        codecs: list[RTCRtpCodecParameters] | None = getattr(transceiver, compat.TRANSCEIVER_CODECS, None)
        by_pt = offered.get(transceiver.mid or "", {})
        for codec in codecs or []:
            theirs = by_pt.get(codec.payloadType) if codec.payloadType is not None else None
            if codec.mimeType.lower() != "video/h264" or theirs is None:
                continue
            value = theirs.parameters.get("profile-level-id")
            if not isinstance(value, str) or not _PROFILE_LEVEL_ID.match(value):
                continue  # absent: both sides assume the default, nothing to echo
            ours = codec.parameters.get("profile-level-id")
            answer = answer_profile_level_id(
                value,
                offer_allows_asymmetry=_allows_asymmetry(theirs.parameters),
                local_level_idc=(
                    int(ours[4:6], 16)
                    if isinstance(ours, str) and _PROFILE_LEVEL_ID.match(ours)
                    else LOCAL_LEVEL_IDC
                ),
                local_allows_asymmetry=_allows_asymmetry(codec.parameters),
            )
            if ours != answer:
                codec.parameters["profile-level-id"] = answer
                changed += 1
    return changed
