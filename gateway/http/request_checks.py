"""What a request body must be before anything is spent on it: the checks both planes run.

The media process's handlers (gateway.http.whip, whep, sources) run them, and so does the front process
(gateway.front), which refuses a malformed request before it reaches the process that carries the video.
Each takes its limits as arguments, so neither plane's config type leaks into the other.
"""

from __future__ import annotations

from aiohttp import web

from gateway.errors import BadRequest, PayloadTooLarge, Unprocessable, UnsupportedMediaType
from gateway.http.body import read_body
from gateway.image_header import ImageHeaderError, image_size
from gateway.webrtc.negotiation.sdp import SdpError, TrickleFragment, check_offer, parse_trickle_fragment

SDP_TYPE = "application/sdp"
TRICKLE_TYPE = "application/trickle-ice-sdpfrag"
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/webp"})
MUTATING_WHILE_SHUTTING_DOWN = frozenset({"POST", "PATCH", "PUT"})  # 503 from the stop signal on


async def read_offer_text(request: web.Request, max_bytes: int, timeout_s: float) -> str:
    """The SDP offer in the body: 415 for another Content-Type, 400 when too large or not UTF-8."""
    if request.content_type != SDP_TYPE:
        raise UnsupportedMediaType(f"Content-Type must be {SDP_TYPE}")
    body = await read_body(
        request, max_bytes, timeout_s, BadRequest(f"SDP offer larger than {max_bytes} bytes")
    )
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("SDP offer is not UTF-8 text") from None


async def read_checked_offer(
    request: web.Request, max_bytes: int, timeout_s: float, *, need_send: bool
) -> str:
    """`read_offer_text`, and the offer must pass `check_offer` (400 with its reason)."""
    text = await read_offer_text(request, max_bytes, timeout_s)
    try:
        check_offer(text, need_send=need_send)
    except SdpError as exc:
        raise BadRequest(str(exc)) from None
    return text


async def read_trickle_fragment(
    request: web.Request, max_bytes: int, timeout_s: float
) -> tuple[bytes, TrickleFragment]:
    """A trickle PATCH's body and its parse: 400 when too large, not UTF-8 or not a fragment. (The caller
    checks Content-Type and If-Match first, in the order its answer needs.)"""
    too_large = BadRequest(f"SDP fragment over {max_bytes} bytes")
    body = await read_body(request, max_bytes, timeout_s, too_large)
    try:
        return body, parse_trickle_fragment(body.decode("utf-8", errors="strict"))
    except UnicodeDecodeError:
        raise BadRequest("SDP fragment is not UTF-8") from None
    except SdpError as exc:
        raise BadRequest(str(exc)) from None


async def read_image_body(request: web.Request, max_bytes: int, timeout_s: float) -> bytes:
    """An upload's bytes: 415 for a Content-Type that is not an image we decode, 413 when too large."""
    if request.content_type not in IMAGE_TYPES:
        raise UnsupportedMediaType(f"Content-Type must be one of {', '.join(sorted(IMAGE_TYPES))}")
    return await read_body(
        request, max_bytes, timeout_s, PayloadTooLarge(f"image larger than {max_bytes} bytes")
    )


def check_image_size(body: bytes, max_pixels: int) -> tuple[int, int]:
    """(width, height) from the header; UnsupportedMediaType when there is none, PayloadTooLarge over the
    pixel limit."""
    try:
        width, height = image_size(body)
    except ImageHeaderError as exc:
        raise UnsupportedMediaType(f"body is not a decodable jpeg/png/webp image ({exc})") from None
    if width < 1 or height < 1:
        raise Unprocessable(f"image declares an empty size {width}x{height}")
    if width * height > max_pixels:
        raise PayloadTooLarge(
            f"image is {width}x{height} = {width * height} pixels; the limit is {max_pixels} pixels"
        )
    return width, height
