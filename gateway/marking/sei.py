"""The H.264 statement of synthetic content: an SEI message of type user_data_unregistered (ITU-T H.264
D.1.7) under livefuse's own UUID, put before every keyframe's first NAL unit, so any H.264 reader (FFmpeg
exports it as the frame's side data "SEI unregistered"; a platform's ingest can read it from the
bitstream) learns what the stream is from any keyframe on, without the key.

Its body is UTF-8 JSON: {"synthetic": true, "digital_source_type": IPTC trainedAlgorithmicMedia,
"generator": "livefuse", "mark": "on" | "off", "key_id": N | null}. VP8 has no such place in its bitstream:
for VP8 the statement is the HTTP header and the invisible mark alone."""

from __future__ import annotations

import json
import uuid

from gateway.marking.config import DIGITAL_SOURCE_TYPE, MarkingConfig

LIVEFUSE_SEI_UUID = uuid.UUID(
    "5836a8e7-5c66-519b-8658-9c9fbc2d39e2"
)  # uuid5(URL, "livefuse synthetic content statement")
START_CODE = b"\x00\x00\x00\x01"
NAL_SEI = 6
USER_DATA_UNREGISTERED = 5


def statement(config: MarkingConfig) -> dict[str, object]:
    return {
        "synthetic": True,
        "digital_source_type": DIGITAL_SOURCE_TYPE,
        "generator": "livefuse",
        "mark": "on" if config.enabled else "off",
        "key_id": config.key_id if config.enabled else None,
    }


def _escaped(rbsp: bytes) -> bytes:
    """Emulation prevention (H.264 7.4.1): 0x03 after two zero bytes when the next is 0..3."""
    out = bytearray()
    zeros = 0
    for byte in rbsp:
        if zeros >= 2 and byte <= 3:
            out.append(3)
            zeros = 0
        out.append(byte)
        zeros = zeros + 1 if byte == 0 else 0
    return bytes(out)


def _unescaped(ebsp: bytes) -> bytes:
    out = bytearray()
    zeros = 0
    for byte in ebsp:
        if zeros >= 2 and byte == 3:
            zeros = 0
            continue
        out.append(byte)
        zeros = zeros + 1 if byte == 0 else 0
    return bytes(out)


def sei_nal(config: MarkingConfig) -> bytes:
    """The SEI NAL unit, Annex B (with its start code)."""
    payload = LIVEFUSE_SEI_UUID.bytes + json.dumps(statement(config), separators=(",", ":")).encode()
    size = len(payload)
    header = bytes([USER_DATA_UNREGISTERED]) + b"\xff" * (size // 255) + bytes([size % 255])
    rbsp = header + payload + b"\x80"  # rbsp_trailing_bits
    return START_CODE + bytes([NAL_SEI]) + _escaped(rbsp)


def find_statement(annex_b: bytes) -> dict[str, object] | None:
    """livefuse's statement in an Annex B access unit, or None (other SEI messages are skipped)."""
    for nal in annex_b.replace(b"\x00\x00\x01", b"\x00\x00\x00\x01").split(START_CODE):
        if not nal or nal[0] & 0x1F != NAL_SEI:
            continue
        rbsp = _unescaped(nal[1:])
        i = 0
        while i < len(rbsp) and rbsp[i] != 0x80:
            kind = 0
            while rbsp[i] == 0xFF:
                kind, i = kind + 255, i + 1
            kind, i = kind + rbsp[i], i + 1
            size = 0
            while rbsp[i] == 0xFF:
                size, i = size + 255, i + 1
            size, i = size + rbsp[i], i + 1
            body = rbsp[i : i + size]
            i += size
            if kind == USER_DATA_UNREGISTERED and body[:16] == LIVEFUSE_SEI_UUID.bytes:
                found: dict[str, object] = json.loads(body[16:])
                return found
    return None
