"""An image's pixel size read from its header alone (PNG, JPEG, WebP), before anything is decoded.

Why: a 1.2 MB PNG can decode to 20000x20000 (1.2 GB of RGB); decoding it to find out stalls the server and
spends gigabytes, and a 74-byte PNG claiming 65535x65535 made OpenCV raise (500). The gateway reads the
declared size here, refuses anything over its pixel limit, and only then decodes, in a worker thread.
Pure functions on bytes: no decoder is involved, every malformed header is an `ImageHeaderError`.
"""

from __future__ import annotations

import struct

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers carry the size (all SOFn except DHT C4, JPG C8, DAC CC)
_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})  # TEM, RSTn: no length field


class ImageHeaderError(ValueError):
    """Not a PNG/JPEG/WebP, or its header is cut short or inconsistent (one line)."""


def image_format(data: bytes) -> str | None:
    if data.startswith(PNG_MAGIC):
        return "png"
    if data.startswith(b"\xff\xd8"):
        return "jpeg"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def image_size(data: bytes) -> tuple[int, int]:
    """(width, height) as the header declares it."""
    kind = image_format(data)
    if kind == "png":
        return _png_size(data)
    if kind == "jpeg":
        return _jpeg_size(data)
    if kind == "webp":
        return _webp_size(data)
    raise ImageHeaderError("body is not a jpeg/png/webp image")


def _png_size(data: bytes) -> tuple[int, int]:
    if len(data) < 24 or data[12:16] != b"IHDR":
        raise ImageHeaderError("PNG without an IHDR header")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _jpeg_size(data: bytes) -> tuple[int, int]:
    i = 2
    n = len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            raise ImageHeaderError("JPEG marker expected")
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _STANDALONE:
            i += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image / start of scan before any frame header
            break
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if length < 2:
            raise ImageHeaderError("JPEG segment with a bad length")
        if marker in _SOF:
            if i + 9 > n:
                break
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    raise ImageHeaderError("JPEG without a frame header")


def _webp_size(data: bytes) -> tuple[int, int]:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30:
        if data[23:26] != b"\x9d\x01\x2a":
            raise ImageHeaderError("WebP VP8 without a key frame header")
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        if data[20] != 0x2F:
            raise ImageHeaderError("WebP VP8L with a bad signature")
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return w, h
    raise ImageHeaderError("WebP header cut short or of an unknown kind")
