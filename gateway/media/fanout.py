"""Encode each processed stream ONCE per codec and hand the encoded packets to every subscriber.

aiortc's sender only packetizes `av.Packet`s from its track, so N viewers cost one encode per codec in use.
What a sender would do for raw frames is done here: keyframes on request (`bind_sender` returns where a
sender's PLI/FIR and receiver feedback go; `gateway.webrtc.install.install_sender` hooks them up) and the
bitrate, one `BitratePolicy` per encoder applied between frames (libvpx / libx264 themselves, else FFmpeg's
encoders reopened with a keyframe). A subscriber that falls behind is cleared and waits for the next
keyframe: dropping single inter frames would corrupt its picture, and queueing would add latency.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from fractions import Fraction
from typing import cast

import av
import numpy as np
from aiortc import RTCRtpSender

from gateway.media.colour import rgb_to_i420
from gateway.media.packet_track import QueuedPacketTrack
from gateway.media.planes import is_i420
from gateway.webrtc.codecs import hw_encode
from gateway.webrtc.codecs.h264_encoder import H264Encoder
from gateway.webrtc.codecs.libvpx import Libvpx
from gateway.webrtc.codecs.libx264 import Libx264
from gateway.webrtc.codecs.vp8_encoder import Vp8Encoder
from gateway.webrtc.congestion.bitrate import BitrateConfig, BitratePolicy, size_class_bitrate
from gateway.webrtc.congestion.retransmit_budget import RetransmitBudget
from gateway.webrtc.congestion.send_history import FeedbackSample
from gateway.webrtc.install import SenderFeedback

logger = logging.getLogger(__name__)

VIDEO_TIME_BASE = Fraction(1, 90000)


class PacketTrack(QueuedPacketTrack):
    """A video track whose `recv()` yields encoded `av.Packet`s from a `FanoutEncoder`."""

    kind = "video"

    def __init__(self, encoder: FanoutEncoder, max_queue: int = 8) -> None:
        super().__init__(max_queue)
        self._encoder = encoder
        self._awaiting_key = True

    def offer(self, packet: av.Packet) -> None:
        """Called on the event loop by the encoder's publish step."""
        if self.readyState != "live":
            return
        if self._awaiting_key and not packet.is_keyframe:
            self.dropped += 1
            return
        self._awaiting_key = False
        if self._queue.qsize() >= self._max_queue:
            while not self._queue.empty():
                self._queue.get_nowait()
                self.dropped += 1
            self._awaiting_key = not packet.is_keyframe
            if self._awaiting_key:
                self.dropped += 1
                self._encoder.request_keyframe()
                return
        self._queue.put_nowait(packet)

    def _detach(self) -> None:
        self._encoder.unsubscribe(self)


def _prefixed(packet: av.Packet, prefix: bytes) -> av.Packet:
    """An Annex B access unit with `prefix` (whole NAL units) before its own."""
    out = av.Packet(prefix + bytes(packet))
    out.pts, out.dts, out.is_keyframe = packet.pts, packet.dts, True
    if packet.time_base is not None:
        out.time_base = packet.time_base
    return out


class FanoutEncoder:
    """One encoder (VP8 or H.264) per processed stream and codec; `encode` runs in a worker thread,
    `publish` on the loop."""

    # libvpx realtime speed. aiortc uses -6; -8 encodes in less CPU at about the same quality, and faster
    # settings than that start to cost quality (compare with bench/encoder_settings.py).
    VP8_CPU_USED = -8
    # libvpx's temporal denoiser (aiortc sets 4) is meant for camera noise; what reaches this encoder was
    # already encoded once by the publisher, so it only smears detail. Off (0): cheaper, and sharper at the
    # same rate (bench/encoder_settings.py).
    VP8_NOISE_SENSITIVITY = 0

    def __init__(
        self,
        bitrate: int | None = 1_000_000,
        codec: str = "VP8",
        vp8_cpu_used: int = VP8_CPU_USED,
        vp8_noise_sensitivity: int = VP8_NOISE_SENSITIVITY,
        bitrate_config: BitrateConfig | None = None,
        libvpx: Libvpx | None = None,
        libx264: Libx264 | None = None,
        hardware_h264: hw_encode.HardwareH264 | None = None,
    ) -> None:
        if codec not in ("VP8", "H264"):
            raise ValueError(f"unsupported codec {codec!r}")
        if not -16 <= vp8_cpu_used <= 16:
            raise ValueError(f"vp8_cpu_used must be in [-16, 16], got {vp8_cpu_used}")
        self.codec_name = codec
        # None: the ceiling follows the picture's size class (`fit_size`), until then the 320x240 class's
        self._auto = bitrate is None
        self._size: tuple[int, int] | None = None
        if bitrate is None:
            bitrate = size_class_bitrate(320, 240)
        self._bitrate = bitrate
        self._vp8_cpu_used = vp8_cpu_used
        if not 0 <= vp8_noise_sensitivity <= 6:
            raise ValueError(f"vp8_noise_sensitivity must be in [0, 6], got {vp8_noise_sensitivity}")
        self._vp8_noise_sensitivity = vp8_noise_sensitivity
        self._libvpx = libvpx  # VP8 through libvpx itself: a new rate without a keyframe (vp8_encoder)
        self._libx264 = libx264  # and H.264 through libx264 itself (h264_encoder)
        # NVENC where it opened at start (hw_encode), until this stream's hardware encoder fails
        hardware = hardware_h264 is not None and hardware_h264.choice.hardware and codec == "H264"
        self._hardware = hardware_h264 if hardware else None
        self._on_hardware = False
        # Receivers' feedback (on the loop) -> target; encode() (a worker thread) re-opens at a new target.
        self.bitrate = BitratePolicy(
            bitrate_config or BitrateConfig(max_bps=bitrate, min_bps=min(100_000, bitrate))
        )
        self._target_bitrate = self.bitrate.current_bps
        self._codec: av.video.codeccontext.VideoCodecContext | Vp8Encoder | H264Encoder | None = None
        self._force_key = threading.Event()
        self._subscribers: list[PacketTrack] = []
        self._last_pts: int | None = None
        self.frames_encoded = 0
        # H.264: an SEI NAL put before every keyframe (gateway.marking.sei: the synthetic-content statement)
        self.keyframe_prefix: bytes | None = None
        self.retransmits: dict[int, RetransmitBudget] = {}  # per bound sender

    @property
    def encoding_bps(self) -> int | None:
        """The bitrate the open encoder context runs at (None before the first frame)."""
        return None if self._codec is None else self._codec.bit_rate

    @property
    def encoder_name(self) -> str | None:
        """The encoder this stream runs now (None before the first frame)."""
        if self._codec is None:
            return None
        if self._on_hardware and self._hardware is not None:
            return self._hardware.choice.h264
        return "libvpx" if self.codec_name == "VP8" else hw_encode.SOFTWARE

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def subscribe(self) -> PacketTrack:
        track = PacketTrack(self)
        self._subscribers.append(track)
        self.request_keyframe()
        return track

    def unsubscribe(self, track: PacketTrack) -> None:
        if track in self._subscribers:
            self._subscribers.remove(track)
        self.bitrate.remove(id(track))
        self.retransmits.pop(id(track), None)
        self._retarget()

    def retransmit_counters(self) -> dict[str, int]:
        """Retransmissions of every bound sender: sent, and skipped by the budget or as repeats."""
        total: dict[str, int] = {}
        for budget in self.retransmits.values():
            for name, value in budget.counters().items():
                total[name] = total.get(name, 0) + value
        return total or RetransmitBudget().counters()

    def request_keyframe(self) -> None:
        self._force_key.set()

    @property
    def keyframe_due(self) -> bool:
        """Whether the next frame `encode` takes will (as far as is known now) be a keyframe: none encoded
        yet, a request pending, or an FFmpeg encoder about to reopen at a new rate. A new size is not seen
        here (the frame's marker sees it itself)."""
        own_rate = isinstance(self._codec, Vp8Encoder | H264Encoder)  # takes a new rate without a keyframe
        reopen = self._target_bitrate != self._bitrate and not own_rate
        return self._codec is None or self._force_key.is_set() or reopen

    def bind_sender(
        self, sender: RTCRtpSender, reverse_queue: Callable[[float], float] | None = None
    ) -> SenderFeedback:
        """Where `sender`'s feedback goes (`gateway.webrtc.install.install_sender` hooks it up): its PLI/FIR
        to a keyframe here (it cannot re-encode packets itself), its receiver's reports to the bitrate
        policy. `reverse_queue(now)`: the queue this receiver's reports wait in on their way back (a
        publisher's own uplink, `queue_delay.OneWayDelay.standing`)."""
        key = id(sender.track)
        self.bitrate.add(key)
        self._target_bitrate = self.bitrate.current_bps

        def on_remb(bps: float, now: float) -> None:
            self.bitrate.on_remb(key, bps, now)
            self._retarget(now)

        def on_loss(fraction: float, now: float) -> None:
            self.bitrate.on_loss(key, fraction, now)
            self._retarget(now)

        def on_rtt(rtt_s: float, now: float) -> None:
            self.bitrate.on_rtt(key, rtt_s, now, reverse_queue(now) if reverse_queue is not None else 0.0)
            self._retarget(now)

        # NACKed packets are resent within the target bitrate, and not again within a round trip; what the
        # budget cannot resend soon is repaired with a keyframe instead (congestion.retransmit_budget)
        budget = self.retransmits[key] = RetransmitBudget()
        return SenderFeedback(
            request_keyframe=self.request_keyframe,
            on_remb=on_remb,
            on_loss=on_loss,
            on_rtt=on_rtt,
            retransmits=budget,
            rate_bps=lambda: float(self._target_bitrate),
            rtt_s=lambda: self.bitrate.rtt_s(key),
            on_transit=self.transit_sink(sender),
        )

    def transit_sink(self, sender: RTCRtpSender) -> Callable[[FeedbackSample], None]:
        """Where the transport-cc feedback of `sender`'s receiver goes
        (gateway.webrtc.congestion.transport_cc): its
        one-way queue into this encoder's bitrate policy, as that receiver's delay signal."""
        key = id(sender.track)

        def sink(sample: FeedbackSample) -> None:
            if sample.transit_s is None:
                return
            now = time.monotonic()
            self.bitrate.on_transit(key, sample.transit_s, sample.acked_bps, now)
            self._retarget(now)

        return sink

    def fit_size(self, width: int, height: int) -> None:
        """The next frame's size (on the loop, before `encode`): with an automatic bitrate, a new size class
        moves the ceiling (`BitratePolicy.set_max`)."""
        if not self._auto or self._size == (width, height):
            return
        self._size = (width, height)
        self.bitrate.set_max(size_class_bitrate(width, height))
        self._target_bitrate = self.bitrate.current_bps

    def _retarget(self, now: float | None = None) -> None:
        target = self.bitrate.update(time.monotonic() if now is None else now)
        if target is not None:
            self._target_bitrate = target

    def encode(self, image_rgb: np.ndarray, pts: int, yuv: av.VideoFrame | None = None) -> list[av.Packet]:
        """Encode one RGB frame (blocking; call from a worker thread). pts is in 1/90000 s and must grow.

        `yuv`, when given, is the same picture as an even-sized yuv420p frame (`media.planes`: the decoded
        frame, or its planes with only the changed boxes converted); `image_rgb` is then not converted, and
        `yuv` is not modified beyond its pts, time base and picture type (several encoders may share it)."""
        if yuv is not None and is_i420(yuv):
            frame = yuv
        else:
            if self.codec_name == "H264":  # 4:2:0 H.264 needs even dimensions
                h, w = image_rgb.shape[:2]
                image_rgb = image_rgb[: h - h % 2, : w - w % 2]
            i420 = rgb_to_i420(image_rgb)  # cheaper than libswscale from packed RGB (media/colour.py)
            if i420 is not None:
                frame = av.VideoFrame.from_ndarray(i420, format="yuv420p")
            else:  # odd size
                frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image_rgb), format="rgb24").reformat(
                    format="yuv420p"
                )
        if self._last_pts is not None and pts <= self._last_pts:
            pts = self._last_pts + 1
        self._last_pts = pts
        frame.pts = pts
        frame.time_base = VIDEO_TIME_BASE
        codec = self._codec
        if self._target_bitrate != self._bitrate:
            self._bitrate = self._target_bitrate
            if isinstance(codec, Vp8Encoder | H264Encoder):
                codec.set_bitrate(self._bitrate)  # from this frame on, no keyframe
            else:  # FFmpeg's encoders read the rate when they open: a new one, starting with a keyframe
                codec = None
        # A decoded frame carries its own picture type (I for the publisher's keyframes): only ours counts.
        frame.pict_type = av.video.frame.PictureType.NONE
        if codec is None or codec.width != frame.width or codec.height != frame.height:
            codec = self._open(frame.width, frame.height)
        elif self._force_key.is_set():
            frame.pict_type = av.video.frame.PictureType.I
        self._force_key.clear()
        try:
            packets = list(codec.encode(frame))
        except Exception as e:  # a hardware encoder's failure: software from here, starting with a keyframe
            if not self._on_hardware or self._hardware is None:
                raise
            self._hardware.failed("failed", e)
            self._hardware = None
            packets = list(self._open(frame.width, frame.height).encode(frame))
        if self.keyframe_prefix is not None and self.codec_name == "H264":
            packets = [_prefixed(p, self.keyframe_prefix) if p.is_keyframe else p for p in packets]
        for packet in packets:
            packet.time_base = VIDEO_TIME_BASE
            if packet.pts is None:
                packet.pts = pts
        self.frames_encoded += 1
        return packets

    def _context(self, name: str, width: int, height: int) -> av.video.codeccontext.VideoCodecContext:
        """What both codecs share: size, constant bitrate, 4:2:0, 90 kHz clock, keyframes only on request."""
        codec = cast(av.video.codeccontext.VideoCodecContext, av.CodecContext.create(name, "w"))
        codec.width = width
        codec.height = height
        codec.bit_rate = self._bitrate
        codec.pix_fmt = "yuv420p"
        codec.time_base = VIDEO_TIME_BASE
        codec.gop_size = 3000
        codec.thread_count = 1
        return codec

    def _open(
        self, width: int, height: int
    ) -> av.video.codeccontext.VideoCodecContext | Vp8Encoder | H264Encoder:
        """A new encoder (its first frame is a keyframe). The one it replaces is freed when the last
        reference goes (`Vp8Encoder.__del__`), never here: `close()` may run on the loop during an encode."""
        self._on_hardware = False
        if self.codec_name == "H264":
            if self._hardware is not None:
                try:
                    return self._open_hardware(self._hardware.choice.h264, width, height)
                except Exception as e:  # no device after all, a size it refuses...: software, for good
                    self._hardware.failed("could not start", e)
                    self._hardware = None
            if self._libx264 is not None:
                self._codec = H264Encoder(self._libx264, width, height, self._bitrate)
                return self._codec
            return self._open_h264(width, height)
        if self._libvpx is not None:
            self._codec = Vp8Encoder(
                self._libvpx,
                width,
                height,
                self._bitrate,
                cpu_used=self._vp8_cpu_used,
                noise_sensitivity=self._vp8_noise_sensitivity,
            )
            return self._codec
        codec = self._context("libvpx", width, height)
        codec.qmin = 2
        codec.qmax = 56
        codec.options = {  # aiortc's realtime VP8 settings (aiortc.codecs.vpx.Vp8Encoder), but cpu-used
            "bufsize": str(self._bitrate),
            "cpu-used": str(self._vp8_cpu_used),
            "deadline": "realtime",
            "lag-in-frames": "0",
            "minrate": str(self._bitrate),
            "maxrate": str(self._bitrate),
            "noise-sensitivity": str(self._vp8_noise_sensitivity),
            "overshoot-pct": "15",
            "partitions": "0",
            "static-thresh": "1",
            "undershoot-pct": "100",
        }
        self._codec = codec  # type: ignore[assignment]
        return codec  # type: ignore[return-value]

    def _open_hardware(self, name: str, width: int, height: int) -> av.video.codeccontext.VideoCodecContext:
        """NVENC with the WebRTC settings (hw_encode.configure), opened now so a failure shows here."""
        codec = self._context(name, width, height)
        hw_encode.configure(codec)
        codec.open()
        self._codec = codec  # type: ignore[assignment]
        self._on_hardware = True
        return codec

    def _open_h264(self, width: int, height: int) -> av.video.codeccontext.VideoCodecContext:
        """FFmpeg's libx264 as aiortc's H264Encoder sets it up for WebRTC: constrained baseline (no B-frames,
        what every WebRTC H.264 decoder takes), zero-latency tuning, Annex B output that aiortc's
        `H264Encoder.pack` splits into NAL units. It counts every frame as 1/30 s (h264_encoder says why)."""
        codec = self._context("libx264", width, height)
        codec.framerate = Fraction(30, 1)
        codec.options = {"level": "31", "tune": "zerolatency", "preset": "veryfast"}
        codec.profile = "Baseline"
        self._codec = codec  # type: ignore[assignment]
        return codec  # type: ignore[return-value]

    def publish(self, packets: list[av.Packet]) -> None:
        """Hand packets to every subscriber (on the event loop)."""
        self.bitrate.on_sent(sum(packet.size for packet in packets), time.monotonic())
        for track in list(self._subscribers):
            for packet in packets:
                track.offer(packet)

    def close(self) -> None:
        for track in list(self._subscribers):
            track.stop()
        self._subscribers.clear()
        self._codec = None
