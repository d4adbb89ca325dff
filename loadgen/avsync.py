"""Audio for load jobs, and the viewer-side lip-sync measurement (what a receiver would line up).

Publisher side: `MediaClock` paces both of a job's tracks from one start; `ClickAudioTrack` sends silence
with a short loud click every `period_s`. Viewer side: `AvSyncProbe` maps each stream's RTP timestamps to
the sender's NTP time through its latest sender report and compares what was captured together: click
onsets (Opus decoded off a tap, `gateway.webrtc.sync.taps`) against frames whose capture time their stamped
id gives (`loadgen.stamp`). Positive offset = the audio is placed later than its picture (BT.1359 tolerates
+125 / -45 ms); the encoder's own look-ahead is part of what a viewer hears and is not subtracted.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

import av
import numpy as np
from aiortc import MediaStreamTrack, RTCRtpReceiver, RTCRtpSender
from aiortc.mediastreams import MediaStreamError
from aiortc.rtp import RtpPacket

from gateway.webrtc.install import install_sender_clock, tap_audio, tap_video_reports
from gateway.webrtc.sync.clocks import ntp64_of
from gateway.webrtc.sync.taps import decoded_pts_origin

AUDIO_RATE = 48_000
SAMPLES_PER_FRAME = 960  # 20 ms: what aiortc's Opus encoder packs per packet
CLICK_S = 0.010
CLICK_THRESHOLD = 0.25  # of full scale; the click is 0.7, silence is 0


@dataclass
class MediaClock:
    """The shared capture clock of one publisher's tracks: media time t is due at start + t."""

    start: float | None = None

    def due(self, media_s: float) -> float:
        if self.start is None:
            self.start = time.monotonic()
        return self.start + media_s

    def reanchor(self, media_s: float) -> None:
        """Far behind (saturated machine): move the clock so media time `media_s` is due now (both tracks)."""
        self.start = time.monotonic() - media_s


def stamp_capture_reports(sender: RTCRtpSender, clock: MediaClock, rate: int) -> bool:
    """Make a publisher's sender reports carry the CAPTURE instant of their RTP timestamp on `clock`, as a
    browser's do (aiortc's own carry the send time, which a busy machine delays by tens of ms, differently
    for audio and video). The gateway then learns the true A/V relation from them whatever the load; False
    on an aiortc where the stamping is not available (reports stay send-time based)."""
    wall_minus_mono = time.time() - time.monotonic()

    def capture_of(media_ts: int) -> int | None:
        if clock.start is None:
            return None
        return ntp64_of(clock.start + media_ts / rate + wall_minus_mono)

    return install_sender_clock(sender, capture_of) is not None


async def wait_due(clock: MediaClock, media_s: float) -> None:
    now = time.monotonic()
    due = clock.due(media_s)
    if due > now:
        await asyncio.sleep(due - now)
    elif now - due > 1.0:
        clock.reanchor(media_s)


def click_frame(n: int, period_s: float) -> np.ndarray:
    """Samples (int16, mono) of audio frame n: a 2 kHz click starts at every multiple of period_s."""
    t = (n * SAMPLES_PER_FRAME + np.arange(SAMPLES_PER_FRAME)) / AUDIO_RATE
    phase = np.mod(t + 1e-9, period_s)
    on = phase < CLICK_S
    wave = 0.7 * np.sin(2 * np.pi * 2000.0 * phase) * on
    wave[on] = np.where(np.abs(wave[on]) < 0.3, 0.7, wave[on])  # onset sample is loud (not a zero crossing)
    return (wave * 32767).astype(np.int16)


class ClickAudioTrack(MediaStreamTrack):
    """20 ms mono 48 kHz frames on the job's MediaClock; a click at every multiple of `period_s`."""

    kind = "audio"

    def __init__(self, clock: MediaClock, period_s: float = 1.0, stop_after_s: float | None = None) -> None:
        super().__init__()
        self._clock = clock
        self._period_s = period_s
        self._stop_after_s = stop_after_s
        self._n = 0

    async def recv(self) -> av.AudioFrame:
        n = self._n
        media_s = n * SAMPLES_PER_FRAME / AUDIO_RATE
        if self.readyState != "live" or (self._stop_after_s is not None and media_s >= self._stop_after_s):
            raise MediaStreamError
        self._n += 1
        await wait_due(self._clock, media_s)
        samples = click_frame(n, self._period_s)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = AUDIO_RATE
        frame.pts = n * SAMPLES_PER_FRAME
        frame.time_base = Fraction(1, AUDIO_RATE)
        return frame


def _peak_per_sample(frame: av.AudioFrame) -> np.ndarray:
    """|amplitude| per sample (max over channels), 0..1, for packed or planar, int16 or float output."""
    arr = frame.to_ndarray()
    channels = len(frame.layout.channels)
    if not frame.format.is_planar:
        arr = arr.reshape(-1, channels).T
    peak = np.abs(arr.astype(np.float32)).max(axis=0)
    return peak / 32768.0 if arr.dtype == np.int16 else peak


@dataclass
class _Report:
    ntp_s: float
    rtp: int
    rate: int

    def ntp_of(self, timestamp: int) -> float:
        delta = (timestamp - self.rtp) & 0xFFFFFFFF
        if delta >= 1 << 31:
            delta -= 1 << 32
        return self.ntp_s + delta / self.rate


@dataclass
class AvSyncProbe:
    """Lip-sync as a receiver computes it (see the module docstring). Feed it one viewer connection."""

    fps: float
    period_s: float = 1.0
    first_frame_id: int = 0
    offsets_ms: list[float] = field(default_factory=list)
    clicks: int = 0
    flashes: int = 0
    audio_packets: int = 0
    repeats: int = 0  # frames whose stamp was seen before (the gateway's late policy repeated a picture)
    _max_id: int = -1
    on_offset: Callable[[float], None] | None = None
    _audio_sr: _Report | None = None
    _video_sr: _Report | None = None
    _video_receiver: RTCRtpReceiver | None = None
    _video_marks: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=64))
    _decoder: av.AudioCodecContext | None = None
    _last_loud: int | None = None

    def attach(self, audio: RTCRtpReceiver, video: RTCRtpReceiver) -> bool:
        self._video_receiver = video
        ok = tap_audio(audio, self._on_audio, self._on_audio_sr)
        return tap_video_reports(video, self._on_video_sr) and ok

    def _on_audio_sr(self, ntp_s: float, rtp: int) -> None:
        self._audio_sr = _Report(ntp_s, rtp, AUDIO_RATE)

    def _on_video_sr(self, ntp_s: float, rtp: int) -> None:
        self._video_sr = _Report(ntp_s, rtp, 90_000)

    def on_video_frame(self, frame_id: int | None, pts: int | None, bright: bool = False) -> None:
        """A decoded viewer frame: its stamped id (None if unreadable) and aiortc pts (1/90000 s)."""
        if frame_id is None or pts is None or self._video_sr is None or self._video_receiver is None:
            return
        origin = decoded_pts_origin(self._video_receiver)
        if origin is None:
            return
        if frame_id <= self._max_id:
            # A repeated picture: it carries the timestamp of the input frame it stands in for, but its
            # stamp names the older frame it shows, so it says nothing about the timeline. Skipped.
            self.repeats += 1
            return
        self._max_id = frame_id
        media_s = (frame_id - self.first_frame_id) / self.fps
        if bright and round(media_s / self.period_s) * self.period_s == media_s:
            self.flashes += 1
        ntp = self._video_sr.ntp_of((pts + origin) & 0xFFFFFFFF)
        self._video_marks.append((time.monotonic(), ntp - media_s))

    def _on_audio(self, packet: RtpPacket) -> None:
        self.audio_packets += 1
        if self._decoder is None:
            self._decoder = av.CodecContext.create("libopus", "r")  # type: ignore[assignment]
        decoder = self._decoder
        assert decoder is not None
        out = av.Packet(packet.payload)
        try:
            frames = decoder.decode(out)
        except av.error.FFmpegError:
            return
        for frame in frames:
            mono = _peak_per_sample(frame)
            loud = np.flatnonzero(mono > CLICK_THRESHOLD)
            if not loud.size:
                continue
            onset = (packet.timestamp + int(loud[0])) & 0xFFFFFFFF
            since = None if self._last_loud is None else (onset - self._last_loud) & 0xFFFFFFFF
            if since is None or since > AUDIO_RATE * self.period_s / 2:
                self._on_click(onset)
            self._last_loud = (packet.timestamp + int(loud[-1])) & 0xFFFFFFFF

    def _on_click(self, timestamp: int) -> None:
        self.clicks += 1
        if self._audio_sr is None or not self._video_marks:
            return
        recent = [v for t, v in self._video_marks if time.monotonic() - t < 2.0]
        if len(recent) < 3:
            return
        video_base = statistics.median(recent)
        ntp = self._audio_sr.ntp_of(timestamp)
        n = round((ntp - video_base) / self.period_s)
        offset = (ntp - n * self.period_s - video_base) * 1000.0
        self.offsets_ms.append(offset)
        if self.on_offset is not None:
            self.on_offset(offset)
