"""A VP8 encoder on libvpx itself whose bitrate changes between frames without a keyframe.

It answers FanoutEncoder's calls as FFmpeg's `libvpx` context did, with the settings FFmpeg derived
(constant bitrate, 1 s buffer starting at libwebrtc's 500 ms, q 2..56, realtime, keyframes on request), and
adds `set_bitrate`: the next frame takes the new target as an inter frame. Same picture at the same rate as
FFmpeg's (the unit tests compare rate and PSNR). Frames are read from their own planes, without a copy.
"""

from __future__ import annotations

from fractions import Fraction

import av

from gateway.webrtc.codecs.libvpx import (
    VP8E_SET_CPUUSED,
    VP8E_SET_NOISE_SENSITIVITY,
    VP8E_SET_STATIC_THRESHOLD,
    VP8E_SET_TOKEN_PARTITIONS,
    VPX_CBR,
    VPX_EFLAG_FORCE_KF,
    Image,
    Libvpx,
)

TIME_BASE = Fraction(1, 90000)
_FRAME_TICKS = 3000  # the duration given with the first frame (30 fps); later ones are their pts step


def kbps(bps: int) -> int:
    """libvpx's rate unit, rounded as FFmpeg rounds it."""
    return max(1, (bps + 500) // 1000)


class Vp8Encoder:
    """One open VP8 encoder of a fixed size (a new size needs a new encoder, which starts with a keyframe)."""

    def __init__(
        self,
        libvpx: Libvpx,
        width: int,
        height: int,
        bitrate: int,
        *,
        cpu_used: int,
        noise_sensitivity: int,
        qmin: int = 2,
        qmax: int = 56,
        initial_buffer_ms: int = 500,
    ) -> None:
        self._libvpx = libvpx
        self.width = width
        self.height = height
        cfg = libvpx.default_config()
        cfg.g_w, cfg.g_h = width, height
        cfg.g_threads = 1
        cfg.g_timebase_num, cfg.g_timebase_den = TIME_BASE.numerator, TIME_BASE.denominator
        cfg.g_lag_in_frames = 0
        cfg.g_error_resilient = 0
        cfg.rc_end_usage = VPX_CBR
        cfg.rc_target_bitrate = kbps(bitrate)
        cfg.rc_min_quantizer, cfg.rc_max_quantizer = qmin, qmax
        cfg.rc_undershoot_pct, cfg.rc_overshoot_pct = 100, 15
        cfg.rc_buf_sz = 1000  # ms: FFmpeg's bufsize = one second of the bitrate
        cfg.rc_buf_optimal_sz = cfg.rc_buf_sz * 5 // 6
        # libwebrtc's starting level (LibvpxVp8Encoder: 500 ms); libvpx's default, 4 s, is clamped to the
        # full buffer and spent on the first keyframe, which then fills a slow link's queue by itself
        # (docs/ARCHITECTURE.md "Media details").
        cfg.rc_buf_initial_sz = initial_buffer_ms
        cfg.rc_dropframe_thresh = 0
        cfg.kf_max_dist = 3000
        self._cfg = cfg
        self._bitrate = bitrate
        self._ctx = libvpx.new_context(cfg)
        try:
            libvpx.control(self._ctx, VP8E_SET_CPUUSED, cpu_used)
            libvpx.control(self._ctx, VP8E_SET_NOISE_SENSITIVITY, noise_sensitivity)
            libvpx.control(self._ctx, VP8E_SET_STATIC_THRESHOLD, 1)
            libvpx.control(self._ctx, VP8E_SET_TOKEN_PARTITIONS, 0)
            self._image = Image()
            libvpx.wrap(self._image, width, height)
        except BaseException:
            libvpx.destroy(self._ctx)
            raise
        self._last_pts: int | None = None
        self._open = True

    @property
    def bit_rate(self) -> int:
        return self._bitrate

    def set_bitrate(self, bps: int) -> None:
        """The target from the next frame on; no keyframe."""
        if kbps(bps) != self._cfg.rc_target_bitrate:
            self._cfg.rc_target_bitrate = kbps(bps)
            self._libvpx.set_config(self._ctx, self._cfg)
        self._bitrate = bps

    def encode(self, frame: av.VideoFrame) -> list[av.Packet]:
        """Encode one yuv420p frame of this encoder's size (pts in 1/90000 s, growing); a frame whose
        `pict_type` is I is encoded as a keyframe."""
        if not self._open:
            raise RuntimeError("encoder closed")
        if frame.format.name != "yuv420p" or (frame.width, frame.height) != (self.width, self.height):
            got = f"{frame.format.name} {frame.width}x{frame.height}"
            raise ValueError(f"expected yuv420p {self.width}x{self.height}, got {got}")
        for index, plane in enumerate(frame.planes):
            self._image.planes[index] = plane.buffer_ptr
            self._image.stride[index] = plane.line_size
        pts = int(frame.pts or 0)
        duration = _FRAME_TICKS if self._last_pts is None else max(1, pts - self._last_pts)
        self._last_pts = pts
        flags = VPX_EFLAG_FORCE_KF if frame.pict_type == av.video.frame.PictureType.I else 0
        packets = []
        for encoded in self._libvpx.encode(self._ctx, self._image, pts, duration, flags):
            packet = av.Packet(encoded.data)
            packet.pts = packet.dts = encoded.pts
            packet.time_base = TIME_BASE
            packet.is_keyframe = encoded.keyframe
            packets.append(packet)
        return packets

    def close(self) -> None:
        if self._open:
            self._open = False
            self._libvpx.destroy(self._ctx)

    def __del__(self) -> None:
        if getattr(self, "_open", False):
            self.close()
