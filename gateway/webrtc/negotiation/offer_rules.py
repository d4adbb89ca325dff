"""Structural rules an offer must meet before a peer connection is built for it.

aiortc accepts offers it cannot answer (a BUNDLE group naming a missing mid, an m-line without `a=mid`,
addresses it fails to write back) and fails half way through building the session; checked here, a bad
offer costs one 400 and never an admission slot. An audio m-line with no codec aiortc speaks is no reason
to refuse: `make_answerable` gives aiortc a placeholder codec for it and `restore_unusable_audio` puts the
offer's own first format back into the answer, inactive.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass

# What aiortc can negotiate for audio (aiortc.codecs.CODECS["audio"]).
AUDIO_CODECS = frozenset({"OPUS", "G722", "PCMU", "PCMA"})
PLACEHOLDER_AUDIO = ("0", "PCMU/8000")
_MID = re.compile(r"^[A-Za-z0-9_\-.~+]{1,32}$")
_MDNS = re.compile(r"^[A-Za-z0-9\-]{1,63}\.local$")


class OfferRuleError(ValueError):
    """One line saying which rule the offer breaks."""


@dataclass(frozen=True)
class MediaSection:
    kind: str
    mid: str | None
    formats: tuple[str, ...]
    rtpmap: dict[str, str]  # payload type -> "NAME/clock[/channels]"


@dataclass(frozen=True)
class OfferStructure:
    sections: tuple[MediaSection, ...]
    bundle: tuple[str, ...]

    @property
    def unusable_audio_mids(self) -> tuple[str, ...]:
        """Audio m-lines with no codec aiortc speaks: answered inactive instead of failing the offer."""
        return tuple(
            s.mid
            for s in self.sections
            if s.kind == "audio" and s.mid is not None and not usable_audio_codecs(s)
        )


def usable_audio_codecs(section: MediaSection) -> tuple[str, ...]:
    names = []
    for pt in section.formats:
        name = section.rtpmap.get(pt, _STATIC_AUDIO.get(pt, "")).split("/")[0].upper()
        if name in AUDIO_CODECS:
            names.append(name)
    return tuple(names)


_STATIC_AUDIO = {"0": "PCMU/8000", "8": "PCMA/8000", "9": "G722/8000"}


def _check_address(line: str, what: str) -> None:
    """`IN IP4 a.b.c.d` / `IN IP6 ::1` (an optional /ttl after an IPv4 address is allowed)."""
    parts = line.split()
    if len(parts) != 3 or parts[0] != "IN" or parts[1] not in ("IP4", "IP6"):
        raise OfferRuleError(f"malformed {what} line: {line[:60]!r}")
    address = parts[2].split("/")[0]
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        raise OfferRuleError(f"{what} address {address[:40]!r} is not an IP address") from None
    if parsed.version != (4 if parts[1] == "IP4" else 6):
        raise OfferRuleError(f"{what} address {address[:40]!r} is not {parts[1]}")


def check_candidate(value: str) -> None:
    """An `a=candidate:` value (without the prefix) whose address the gateway may contact: an IP address or
    an mDNS `.local` name (what browsers send to hide their addresses), a port in 1..65535, a numeric
    component and priority. Any other host name would make the gateway resolve names an attacker chose."""
    parts = value.split()
    if len(parts) < 8 or parts[6] != "typ":
        raise OfferRuleError(f"malformed candidate: {value[:60]!r}")
    if not (parts[1].isdigit() and parts[3].isdigit() and parts[5].isdigit()):
        raise OfferRuleError(f"malformed candidate (component, priority, port): {value[:60]!r}")
    port = int(parts[5])
    if not (1 <= port <= 65535 or (port == 0 and parts[2].lower() == "tcp")):  # active TCP may say 0
        raise OfferRuleError(f"candidate port {port} out of range")
    host = parts[4]
    if host.endswith(".local") and _MDNS.match(host):
        return
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise OfferRuleError(f"candidate address {host[:40]!r} is not an IP address or mDNS name") from None


def check_structure(sdp: str) -> OfferStructure:
    """Mids present, unique and well-formed; BUNDLE names only existing mids and at least one; every `c=`
    and `a=rtcp:` address parseable. Raises OfferRuleError (one line)."""
    sections: list[MediaSection] = []
    bundle: list[str] | None = None
    current: dict[str, object] | None = None

    def flush() -> None:
        if current is not None:
            sections.append(
                MediaSection(
                    kind=str(current["kind"]),
                    mid=current["mid"],  # type: ignore[arg-type]
                    formats=current["formats"],  # type: ignore[arg-type]
                    rtpmap=current["rtpmap"],  # type: ignore[arg-type]
                )
            )

    for raw in sdp.splitlines():
        line = raw.strip()
        if line.startswith("m="):
            flush()
            parts = line[2:].split()
            if len(parts) < 4:
                raise OfferRuleError(f"malformed m-line: {line[:60]!r}")
            current = {"kind": parts[0], "mid": None, "formats": tuple(parts[3:]), "rtpmap": {}}
        elif line.startswith("c="):
            _check_address(line[2:], "c=")
        elif line.startswith("a=rtcp:"):
            value = line[len("a=rtcp:") :].split(None, 1)
            if len(value) == 2:
                _check_address(value[1], "a=rtcp")
        elif line.startswith("a=group:BUNDLE"):
            if current is not None:
                raise OfferRuleError("a=group:BUNDLE must be a session-level line")
            bundle = line[len("a=group:BUNDLE") :].split()
        elif current is not None and line.startswith("a=mid:"):
            mid = line[len("a=mid:") :].strip()
            if current["mid"] is not None:
                raise OfferRuleError("an m-line has two a=mid lines")
            if not _MID.match(mid):
                raise OfferRuleError(f"malformed a=mid value {mid[:40]!r}")
            current["mid"] = mid
        elif line.startswith("a=candidate:"):
            check_candidate(line[len("a=candidate:") :])
        elif current is not None and line.startswith("a=rtpmap:"):
            pt, _, codec = line[len("a=rtpmap:") :].partition(" ")
            current["rtpmap"][pt] = codec.strip()  # type: ignore[index]
    flush()
    if not sections:
        raise OfferRuleError("SDP offer has no m-lines")
    mids = [s.mid for s in sections]
    for index, section_mid in enumerate(mids):
        if section_mid is None:
            raise OfferRuleError(f"m-line {index} ({sections[index].kind}) has no a=mid")
    if len(set(mids)) != len(mids):
        raise OfferRuleError("SDP offer repeats an a=mid value")
    if bundle is not None:
        if not bundle:
            raise OfferRuleError("a=group:BUNDLE names no mid")
        unknown = [m for m in bundle if m not in mids]
        if unknown:
            raise OfferRuleError(f"a=group:BUNDLE names mid(s) no m-line has: {', '.join(unknown)[:60]}")
        if len(set(bundle)) != len(bundle):
            raise OfferRuleError("a=group:BUNDLE repeats a mid")
    return OfferStructure(tuple(sections), tuple(bundle or ()))


def make_answerable(sdp: str, structure: OfferStructure) -> str:
    """Give each audio m-line without a usable codec a placeholder (PCMU) so aiortc can build an answer
    for it; the session answers it inactive and `restore_unusable_audio` removes the placeholder again."""
    targets = set(structure.unusable_audio_mids)
    if not targets:
        return sdp
    return _rewrite_sections(sdp, targets, _add_placeholder)


def restore_unusable_audio(answer: str, offer: OfferStructure) -> str:
    """In the answer: the placeholder codec of each unusable audio m-line is replaced by the offer's own
    first format, direction inactive (RFC 3264: an answer only lists offered formats)."""
    by_mid = {s.mid: s for s in offer.sections if s.mid in set(offer.unusable_audio_mids)}
    if not by_mid:
        return answer

    def restore(lines: list[str], mid: str) -> list[str]:
        section = by_mid[mid]
        pt = section.formats[0]
        out = []
        for line in lines:
            if line.startswith("m="):
                parts = line.split()
                line = " ".join([*parts[:3], pt])
            elif line.startswith(("a=rtpmap:", "a=fmtp:", "a=rtcp-fb:", "a=ssrc", "a=msid:")):
                continue
            elif line in ("a=sendrecv", "a=sendonly", "a=recvonly"):
                line = "a=inactive"
            out.append(line)
            if line.startswith("m=") and pt in section.rtpmap:
                out.append(f"a=rtpmap:{pt} {section.rtpmap[pt]}")
        return out

    return _rewrite_sections(answer, set(by_mid), restore)


def _add_placeholder(lines: list[str], mid: str) -> list[str]:
    pt, codec = PLACEHOLDER_AUDIO
    out = []
    for line in lines:
        if line.startswith("m="):
            parts = line.split()
            line = " ".join([*parts[:3], pt, *parts[3:]])
        out.append(line)
        if line.startswith("m="):
            out.append(f"a=rtpmap:{pt} {codec}")
    return out


def _rewrite_sections(sdp: str, mids: set[str], rewrite: Callable[[list[str], str], list[str]]) -> str:
    """Apply `rewrite(lines, mid)` to every m-section whose a=mid is in `mids`; CRLF line ends."""
    blocks: list[list[str]] = [[]]
    for line in sdp.splitlines():
        if line.startswith("m="):
            blocks.append([])
        blocks[-1].append(line)
    out: list[str] = list(blocks[0])
    for block in blocks[1:]:
        mid = next((b[len("a=mid:") :].strip() for b in block if b.startswith("a=mid:")), None)
        if mid is not None and mid in mids:
            block = rewrite(block, mid)
        out.extend(block)
    return "\r\n".join(out) + "\r\n"
