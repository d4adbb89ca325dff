"""How a gateway discloses that its output is synthetic (built once at the edge, from --no-mark,
--mark-key-file and --disclosure-label)."""

from __future__ import annotations

from dataclasses import dataclass

from engines.marking.pattern import key_id

# IPTC NewsCodes digital source type for media made by a trained model (what the H.264 SEI message and the
# HTTP header state)
DIGITAL_SOURCE_TYPE = "http://cv.iptc.org/newscodes/digitalsourcetype/trainedAlgorithmicMedia"
HEADER = "Livefuse-Synthetic-Content"
MAX_LABEL = 64


@dataclass(frozen=True)
class MarkingConfig:
    enabled: bool = True  # the invisible mark in every output frame (the public layer even without a key)
    key: bytes | None = None  # the payload's key (--mark-key-file); None: public layer only
    label: str | None = None  # visible text drawn on every output frame (--disclosure-label)

    def __post_init__(self) -> None:
        check_label(self.label)

    @property
    def key_id(self) -> int | None:
        return None if self.key is None else key_id(self.key)

    def header_value(self) -> str:
        """What the WHIP/WHEP answers and the egress POST say about the stream."""
        parts = [f"digital-source-type={DIGITAL_SOURCE_TYPE}"]
        parts.append(f"mark={'on' if self.enabled else 'off'}")
        if self.enabled and self.key is not None:
            parts.append(f"key-id={self.key_id}")
        return "; ".join(parts)


def check_label(label: str | None) -> str | None:
    """A label is one line of printable ASCII (the built-in font's), at most MAX_LABEL characters."""
    if label is None:
        return None
    if len(label) > MAX_LABEL:
        raise ValueError(f"disclosure label longer than {MAX_LABEL} characters")
    if not all(32 <= ord(c) < 127 for c in label):
        raise ValueError("disclosure label must be printable ASCII on one line")
    return label or None


def disclosure_headers(config: MarkingConfig) -> dict[str, str]:
    """The header on WHIP and WHEP answers and on the egress POST: the stream is synthetic."""
    return {HEADER: config.header_value()}
