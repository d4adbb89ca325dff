"""Hardware H.264 encode (NVENC through PyAV's `h264_nvenc`) where the GPU has it, libx264 otherwise.

Why: an H.264 encode per stream and frame runs on the CPU beside the image work; an NVIDIA GPU encodes on
NVENC for free. PyAV's wheels carry `h264_nvenc`, but it opens only where a CUDA driver and an NVENC unit
exist, so it is tried once at start (`detect`): one event and the /api/stats "encoder" field say which H.264
encoder runs and why hardware is not used. A stream whose NVENC encoder cannot open, or fails mid-stream,
moves to the software encoder (counted, one event) starting with a keyframe; a session never fails for it.
VP8 has no NVENC: it always encodes in software. Settings mirror the software encoder's for WebRTC: no
B-frames, constrained baseline, IDR only on request, SPS/PPS with every IDR, one frame of latency.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from gateway.webrtc.codecs.hardware import one_line, probe_codec

HARDWARE = "h264_nvenc"
SOFTWARE = "libx264"
EVENT = "encoder"
H264 = "video/h264"
# NVENC's low-latency settings (FFmpeg's nvenc options): fastest preset, ultra-low-latency tuning, constant
# bitrate, no lookahead or reordering, and a keyframe asked for by the picture type is an IDR.
NVENC_OPTIONS = {
    "preset": "p1",
    "tune": "ull",
    "rc": "cbr",
    "zerolatency": "1",
    "delay": "0",
    "forced-idr": "1",
    "bf": "0",
    "profile": "baseline",
}
PROBE_SIZE = (256, 144)


@dataclass
class EncoderChoice:
    """The H.264 encoder that runs, and for software, why the hardware one does not."""

    h264: str
    reason: str | None = None
    fallbacks: int = 0  # streams moved from hardware to software
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def hardware(self) -> bool:
        return self.h264 != SOFTWARE

    def fell_back(self) -> None:
        with self._lock:
            self.fallbacks += 1

    def to_dict(self) -> dict[str, object]:
        return {
            "encoders": {H264: self.h264, "video/vp8": "libvpx"},
            "software_reasons": {H264: self.reason} if self.reason else {},
            "hardware_fallbacks": self.fallbacks,
        }

    def summary(self) -> str:
        return f"h264: {self.h264}, vp8: libvpx"


def configure(codec: Any) -> None:
    """NVENC's settings on a `h264_nvenc` context that already has its size, rate, format and clock."""
    codec.options = dict(NVENC_OPTIONS)


def probe(name: str = HARDWARE) -> str | None:
    """Why the PyAV encoder `name` cannot run here (one line), or None when it opened."""

    def setup(ctx: Any) -> None:
        ctx.width, ctx.height = PROBE_SIZE
        ctx.pix_fmt = "yuv420p"
        ctx.time_base = Fraction(1, 90000)
        ctx.bit_rate = 1_000_000
        configure(ctx)

    return probe_codec(name, "w", setup)


def choose(probe_one: Callable[[str], str | None]) -> EncoderChoice:
    """The H.264 encoder given what `probe_one` says about the hardware one (pure)."""
    reason = probe_one(HARDWARE)
    return EncoderChoice(h264=SOFTWARE, reason=reason) if reason else EncoderChoice(h264=HARDWARE)


def detect(enabled: bool = True) -> EncoderChoice:
    if not enabled:
        return choose(lambda name: "hardware encode is turned off")
    return choose(probe)


@dataclass(frozen=True)
class HardwareH264:
    """What a stream's H.264 encoder needs to use hardware: the choice (counts fallbacks) and where a
    fallback is told (the monitor's event)."""

    choice: EncoderChoice
    on_fallback: Callable[[str], None]

    def failed(self, what: str, error: BaseException) -> None:
        self.choice.fell_back()
        self.on_fallback(f"{self.choice.h264} {what} ({one_line(error)}); this stream encodes in software")
