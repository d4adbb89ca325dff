"""A session's capture clock: when each input frame and audio packet was captured, on one timeline. Pure.

Receivers line audio up with video through the sender reports of both streams, so both must state capture
time. Each input stream's capture instant is its least-delayed arrival, aligned to the A/V relation the
publisher's own sender reports state (`CaptureClock`); `Unwrapper` extends 32-bit RTP timestamps, and the NTP
helpers convert. The reasons and measurements: README's Audio section and docs/BENCHMARKS.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

AUDIO_RATE = 48_000
VIDEO_RATE = 90_000
_NTP_EPOCH_OFFSET = 2_208_988_800  # seconds from 1900-01-01 (NTP) to 1970-01-01 (Unix)


@dataclass(frozen=True)
class SyncConfig:
    leak_s_per_s: float = 0.001  # how fast an offset estimate may rise without a new minimum


@dataclass
class Unwrapper:
    """32-bit RTP timestamps -> a growing integer relative to the first one (reorder-safe near the last)."""

    first: int | None = None
    last_rel: int = 0

    def rel(self, timestamp: int) -> int:
        timestamp &= 0xFFFFFFFF
        if self.first is None:
            self.first = timestamp
            self.last_rel = 0
            return 0
        return self.near((timestamp - self.first) & 0xFFFFFFFF, update=True)

    def near(self, masked: int, *, update: bool = False) -> int:
        """The unwrapped value congruent to `masked` (mod 2^32) that lies closest to the last one seen."""
        delta = (masked - self.last_rel) & 0xFFFFFFFF
        if delta >= 1 << 31:
            delta -= 1 << 32
        value = self.last_rel + delta
        if update and value > self.last_rel:
            self.last_rel = value
        return value


@dataclass
class StreamTimeline:
    """capture(rel) = offset + rel / rate, offset from arrivals (see the module docstring)."""

    rate: int
    config: SyncConfig = field(default_factory=SyncConfig)
    offset: float | None = None
    publisher_offset: float | None = None  # publisher's NTP (s) - rel / rate, least over its SRs
    _updated: float = 0.0
    _report_updated: float = 0.0
    samples: int = 0

    def observe(self, rel: int, arrival_s: float) -> None:
        sample = arrival_s - rel / self.rate
        self.samples += 1
        if self.offset is None:
            self.offset = sample
        else:
            leaked = self.offset + self.config.leak_s_per_s * max(0.0, arrival_s - self._updated)
            self.offset = min(leaked, sample)
        self._updated = arrival_s

    def publisher_report(self, ntp_s: float, rel: int, now_s: float) -> None:
        """An SR of the publisher's. The least offset over its reports is kept (with the same slow rise):
        a sender that stamps SRs with SEND time (aiortc) adds its own encode and scheduling delay to some
        reports, never subtracts, and a capture-time sender (browsers) gives the same value every time."""
        sample = ntp_s - rel / self.rate
        if self.publisher_offset is None:
            self.publisher_offset = sample
        else:
            leaked = self.publisher_offset + self.config.leak_s_per_s * max(0.0, now_s - self._report_updated)
            self.publisher_offset = min(leaked, sample)
        self._report_updated = now_s


class CaptureClock:
    """The session's capture timeline: input audio/video timestamps -> capture instants -> NTP for SRs."""

    def __init__(self, config: SyncConfig | None = None) -> None:
        self.config = config or SyncConfig()
        self.audio = StreamTimeline(AUDIO_RATE, self.config)
        self.video = StreamTimeline(VIDEO_RATE, self.config)
        # one wall/monotonic pairing per session: both streams convert with the same constant
        self._wall_minus_mono = time.time() - time.monotonic()

    def audio_capture(self, rel: int) -> float | None:
        if self.audio.offset is None:
            return None
        return self.audio.offset + rel / AUDIO_RATE

    def video_offset(self) -> float | None:
        """The video stream's offset on the audio-anchored clock (publisher-stated once both SRs are in)."""
        a, v = self.audio, self.video
        if a.offset is not None and a.publisher_offset is not None and v.publisher_offset is not None:
            return a.offset + (v.publisher_offset - a.publisher_offset)
        return v.offset

    def video_capture(self, pts: int) -> float | None:
        offset = self.video_offset()
        return None if offset is None else offset + pts / VIDEO_RATE

    def publisher_skew_ms(self) -> float | None:
        """How far the publisher's SR-stated A/V relation differs from what arrival times alone suggest
        (a diagnostic: a large value means the publisher's video left it later than its audio)."""
        a, v = self.audio, self.video
        if None in (a.offset, v.offset, a.publisher_offset, v.publisher_offset):
            return None
        stated = v.publisher_offset - a.publisher_offset  # type: ignore[operator]
        seen = v.offset - a.offset  # type: ignore[operator]
        return (seen - stated) * 1000.0

    def ntp64(self, mono_s: float) -> int:
        """A monotonic instant as a 64-bit NTP timestamp (what RTCP SRs carry)."""
        return ntp64_of(mono_s + self._wall_minus_mono)


def ntp64_of(unix_s: float) -> int:
    """A Unix time in seconds as a 64-bit NTP timestamp."""
    return int((unix_s + _NTP_EPOCH_OFFSET) * (1 << 32)) & 0xFFFFFFFFFFFFFFFF


def ntp64_to_seconds(ntp: int) -> float:
    """A 64-bit NTP timestamp as seconds (on the sender's NTP scale); only differences are meaningful."""
    return (ntp >> 32) + (ntp & 0xFFFFFFFF) / float(1 << 32)
