"""The load generator's VP8 encoder: aiortc's, with libvpx's temporal denoiser as the run asks (default off).

aiortc runs the denoiser at noise-sensitivity 4 (libwebrtc's x86 setting), which can keep the previous
frame's macroblocks where the picture flips every frame: the frame-id stamp (loadgen.stamp), whose stale
cells the load generator would count as frames the gateway lost. Off, the stamp measures the gateway alone;
`--publisher-denoiser 4` sends what a browser on x86 would. Everything else is aiortc's encoder as it is.
Measurements: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import av
from aiortc import RTCRtpSender
from aiortc.codecs.base import Encoder
from aiortc.codecs.vpx import Vp8Encoder, number_of_threads
from av.frame import Frame
from av.video.frame import VideoFrame

from gateway.webrtc.compat import place_sender_encoder, sender_encoder

AIORTC_NOISE_SENSITIVITY = 4  # aiortc's own (and libwebrtc's on x86): nothing to replace


class PublisherVp8Encoder(Vp8Encoder):
    def __init__(self, noise_sensitivity: int = 0) -> None:
        if not 0 <= noise_sensitivity <= 6:
            raise ValueError(f"VP8 noise sensitivity must be 0..6, got {noise_sensitivity}")
        super().__init__()
        self.noise_sensitivity = noise_sensitivity

    def encode(self, frame: Frame, force_keyframe: bool = False) -> tuple[list[bytes], int]:
        assert isinstance(frame, VideoFrame)
        if frame.format.name != "yuv420p":
            frame = frame.reformat(format="yuv420p")
        codec: Any = self.codec
        if codec is not None and (
            frame.width != codec.width
            or frame.height != codec.height
            or abs(self.target_bitrate - codec.bit_rate) / codec.bit_rate > 0.1  # aiortc's rule
        ):
            self.codec = None
        if self.codec is None:
            self.codec = self._open(frame)
        if force_keyframe:
            frame.pict_type = av.video.frame.PictureType.I
        pts, time_base = frame.pts, frame.time_base  # before encode() rebases them to the codec's clock
        packet = av.Packet(b"".join(bytes(p) for p in self.codec.encode(frame)))
        packet.pts = pts
        if time_base is not None:
            packet.time_base = time_base
        return self.pack(packet)

    def _open(self, frame: VideoFrame) -> Any:
        rate = self.target_bitrate
        codec = av.CodecContext.create("libvpx", "w")
        codec.width, codec.height = frame.width, frame.height
        codec.bit_rate = rate
        codec.pix_fmt = "yuv420p"
        codec.gop_size = 3000
        codec.qmin, codec.qmax = 2, 56
        codec.options = {
            "bufsize": str(rate),
            "cpu-used": "-6",
            "deadline": "realtime",
            "lag-in-frames": "0",
            "minrate": str(rate),
            "maxrate": str(rate),
            "noise-sensitivity": str(self.noise_sensitivity),
            "overshoot-pct": "15",
            "partitions": "0",
            "static-thresh": "1",
            "undershoot-pct": "100",
        }
        codec.thread_count = number_of_threads(frame.width * frame.height, multiprocessing.cpu_count())
        return codec


def use_publisher_encoder(sender: RTCRtpSender, codec_mime: str, noise_sensitivity: int) -> bool:
    """Before the sender's first frame (it makes its encoder then): ours for VP8 when the run asks for another
    denoiser than aiortc's. True when installed."""
    if codec_mime.lower() != "video/vp8" or noise_sensitivity == AIORTC_NOISE_SENSITIVITY:
        return False
    current: Encoder | None = sender_encoder(sender)
    if current is not None:
        raise RuntimeError("the sender already made its encoder: install the publisher's before it starts")
    return place_sender_encoder(sender, PublisherVp8Encoder(noise_sensitivity))
