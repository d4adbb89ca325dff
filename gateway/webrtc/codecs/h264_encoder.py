"""An H.264 encoder on libx264 itself whose bitrate changes between frames without a keyframe.

It answers FanoutEncoder's calls as FFmpeg's `libx264` context did, with its settings (veryfast,
zerolatency, constrained baseline 3.1, Annex B, keyframes on request), and differs in rate control: constant
bitrate with a half-second VBV buffer (x264 reconfigures the rate only with VBV on; `set_bitrate` changes
all three, and a cut drops the buffer's credit), and the rate is scaled by the frame rate the timestamps
show, as x264 otherwise counts each frame as 1/fps of a second. Frames are read from their own planes.
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction

import av

from gateway.webrtc.codecs.libx264 import X264_CSP_I420, X264_TYPE_AUTO, X264_TYPE_IDR, Libx264

TIME_BASE = Fraction(1, 90000)


def kbps(bps: int) -> int:
    """x264's rate unit."""
    return max(1, (bps + 500) // 1000)


class H264Encoder:
    """One open H.264 encoder of a fixed size (a new size needs a new encoder, starting with a keyframe)."""

    PRESET = "veryfast"
    TUNE = "zerolatency"
    PROFILE = "baseline"
    LEVEL = "31"
    FPS = 30  # what x264 is told; the rates it is given are scaled by FPS / the stream's own frame rate
    FPS_WINDOW = 30  # frames the stream's frame rate is measured over
    FPS_MOVE = 0.10  # the rates are re-set when that frame rate moves by more than this fraction
    # The VBV buffer, in seconds of the rate. x264 keeps a full buffer's credit across a rate cut and spends
    # it: half a second overshoots less after a cut and makes smaller keyframes than a full second, for a
    # small quality cost at a steady rate (docs/ARCHITECTURE.md "Media details").
    BUFFER_S = 0.5
    # At a rate cut, what is left of that credit goes too: one frame is encoded with a one-kbit buffer (x264
    # raises it to one frame's worth), then the buffer is set back. x264's own rate estimate still holds
    # seconds of the old rate, so without this the VBV lets it spend the whole credit at once, into the link
    # that just congested. With it the link gets its queue back, for a brief undershoot.
    DRAIN_ON_CUT = True

    def __init__(self, libx264: Libx264, width: int, height: int, bitrate: int) -> None:
        self._x264 = libx264
        self.width = width
        self.height = height
        params = libx264.default_params(self.PRESET, self.TUNE)
        offsets = libx264.offsets
        libx264.set_int(params, offsets.width, width)
        libx264.set_int(params, offsets.height, height)
        for name, value in (
            ("threads", "1"),
            ("level", self.LEVEL),
            ("keyint", "3000"),
            ("scenecut", "0"),  # keyframes only when asked: a new viewer, a PLI, a repair
            ("fps", str(self.FPS)),
            ("annexb", "1"),
            ("repeat-headers", "1"),
            ("log", "0"),  # errors only, to stderr, as FFmpeg's av_log would
            ("force-cfr", "1"),  # no frame held back (see the module docstring)
            *self._rate_options(bitrate, float(self.FPS)),
        ):
            libx264.parse(params, name, value)
        libx264.apply_profile(params, self.PROFILE)
        self._handle = libx264.open(params)
        self._bitrate = bitrate
        self._rate_fps = float(self.FPS)  # the frame rate the rates given to x264 were scaled for
        self._pts: deque[int] = deque(maxlen=self.FPS_WINDOW + 1)
        self._drained = False
        self._picture = libx264.new_picture()
        self._picture.img.i_csp = X264_CSP_I420
        self._picture.img.i_plane = 3
        self._output = libx264.new_picture()
        self._open = True

    @classmethod
    def _rate_options(cls, bps: int, fps: float) -> tuple[tuple[str, str], ...]:
        """Constant bitrate `bps` for a stream of `fps` frames a second, with a `BUFFER_S` buffer: x264 fills
        its buffer by rate / FPS per frame, so a real second of `bps` is `bps * FPS / fps` to it."""
        rate = str(kbps(round(bps * cls.FPS / fps)))
        return (
            ("bitrate", rate),
            ("vbv-maxrate", rate),
            ("vbv-bufsize", str(kbps(round(bps * cls.BUFFER_S)))),
        )

    @property
    def frame_rate(self) -> float:
        """The stream's frame rate: one over the median frame interval of the last `FPS_WINDOW` frames, so
        that a pause (a publisher that stalled, frames dropped at their deadline) does not read as a slow
        stream and multiply the rate x264 is given; `FPS` until two frames have come, within 1..120."""
        steps = sorted(b - a for a, b in zip(self._pts, list(self._pts)[1:], strict=False) if b > a)
        if not steps:
            return float(self.FPS)
        return min(120.0, max(1.0, float(1 / (steps[len(steps) // 2] * TIME_BASE))))

    def _reconfigure(self, bps: int, fps: float, drain: bool = False) -> None:
        params = self._x264.parameters(self._handle)
        for name, value in self._rate_options(bps, fps):
            self._x264.parse(params, name, value)
        if drain:
            self._x264.parse(params, "vbv-bufsize", "1")
            self._drained = True
        self._x264.reconfig(self._handle, params)

    @property
    def bit_rate(self) -> int:
        return self._bitrate

    def set_bitrate(self, bps: int) -> None:
        """The target from the next frame on; no keyframe."""
        if not self._open:
            raise RuntimeError("encoder closed")
        if kbps(bps) != kbps(self._bitrate):
            self._reconfigure(bps, self._rate_fps, drain=self.DRAIN_ON_CUT and bps < self._bitrate)
        self._bitrate = bps

    def encode(self, frame: av.VideoFrame) -> list[av.Packet]:
        """Encode one yuv420p frame of this encoder's size (pts in 1/90000 s, growing); a frame whose
        `pict_type` is I is encoded as a keyframe (IDR)."""
        if not self._open:
            raise RuntimeError("encoder closed")
        if frame.format.name != "yuv420p" or (frame.width, frame.height) != (self.width, self.height):
            got = f"{frame.format.name} {frame.width}x{frame.height}"
            raise ValueError(f"expected yuv420p {self.width}x{self.height}, got {got}")
        picture = self._picture
        for index, plane in enumerate(frame.planes):
            picture.img.plane[index] = plane.buffer_ptr
            picture.img.i_stride[index] = plane.line_size
        picture.i_pts = int(frame.pts or 0)
        self._pts.append(picture.i_pts)
        fps = self.frame_rate
        if abs(fps / self._rate_fps - 1) > self.FPS_MOVE:
            self._rate_fps = fps
            self._reconfigure(self._bitrate, fps, drain=self._drained)  # a cut's drain still applies
        picture.i_type = X264_TYPE_IDR if frame.pict_type == av.video.frame.PictureType.I else X264_TYPE_AUTO
        encoded = self._x264.encode(self._handle, picture, self._output)
        if self._drained:
            self._drained = False
            self._reconfigure(self._bitrate, self._rate_fps)
        if encoded is None:
            return []
        packet = av.Packet(encoded.data)
        packet.pts = packet.dts = encoded.pts
        packet.time_base = TIME_BASE
        packet.is_keyframe = encoded.keyframe
        return [packet]

    def close(self) -> None:
        if self._open:
            self._open = False
            self._x264.close(self._handle)

    def __del__(self) -> None:
        if getattr(self, "_open", False):
            self.close()
