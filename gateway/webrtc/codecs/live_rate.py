"""The libraries that change VP8 / H.264 rates between frames, chosen once per gateway and said once."""

from __future__ import annotations

import logging

from gateway.webrtc.codecs import libvpx, libx264
from gateway.webrtc.codecs.libvpx import Libvpx
from gateway.webrtc.codecs.libx264 import Libx264

logger = logging.getLogger(__name__)


def live_rate_libraries(enabled: bool) -> tuple[Libvpx | None, Libx264 | None]:
    """libvpx and libx264 when `enabled` and loadable; None each: FFmpeg's encoder, reopened at each rate."""
    if not enabled:
        logger.info("bitrate changes reopen FFmpeg's encoders, with a keyframe (--no-live-bitrate)")
        return None, None
    vpx = libvpx.load()
    if vpx is None:
        logger.warning("no usable libvpx: VP8 bitrate changes reopen FFmpeg's encoder, with a keyframe")
    else:
        logger.info("VP8 bitrate changes between frames through libvpx %s (%s)", vpx.version, vpx.path)
    x264 = libx264.load()
    if x264 is None:
        logger.warning("no usable libx264: H.264 bitrate changes reopen FFmpeg's encoder, with a keyframe")
    else:
        logger.info(
            "H.264 bitrate changes between frames through libx264 build %d (%s)", x264.build, x264.path
        )
    return vpx, x264
