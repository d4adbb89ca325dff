"""The session's audio relay: the publisher's Opus packets, untouched, to every WHEP viewer asking for audio.

Nobody changes the sound, so it needs no decode, scheduler or encoder: each packet from the receiver's
`PacketTap` is offered to every viewer's `OpusPacketTrack`, which aiortc's sender only packetizes. Packets
keep their input RTP timestamps (unwrapped), which the session's `CaptureClock` maps to capture time, so
audio and video sender reports share one clock. Live audio never queues: a viewer more than `max_queue`
packets behind loses the oldest (counted).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction

import av
from aiortc.rtp import RtpPacket

from gateway.media.packet_track import QueuedPacketTrack
from gateway.webrtc.sync.clocks import AUDIO_RATE, CaptureClock, Unwrapper

AUDIO_TIME_BASE = Fraction(1, AUDIO_RATE)


@dataclass(frozen=True)
class AudioConfig:
    enabled: bool = True
    max_queue: int = 10  # packets per viewer (200 ms of Opus at 20 ms/packet)


class OpusPacketTrack(QueuedPacketTrack):
    """An audio track whose `recv()` yields the publisher's encoded Opus packets as `av.Packet`s."""

    kind = "audio"

    def __init__(self, relay: AudioRelay, max_queue: int) -> None:
        super().__init__(max_queue)
        self._relay = relay

    def offer(self, packet: av.Packet) -> None:
        if self.readyState != "live":
            return
        while self._queue.qsize() >= self._max_queue:
            self._queue.get_nowait()
            self.dropped += 1
        self._queue.put_nowait(packet)

    def _detach(self) -> None:
        self._relay.unsubscribe(self)


class AudioRelay:
    """One per session with publisher audio. `on_packet` runs on the event loop (the receiver's tap)."""

    def __init__(self, clock: CaptureClock, config: AudioConfig | None = None) -> None:
        self.config = config or AudioConfig()
        self._clock = clock
        self._unwrap = Unwrapper()
        self._ssrc: int | None = None
        self._subscribers: list[OpusPacketTrack] = []
        self.packets_in = 0
        self.packets_relayed = 0  # packet x viewer deliveries
        self.bytes_in = 0
        self.last_packet_s: float | None = None
        self.closed = False

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    @property
    def dropped(self) -> int:
        return sum(t.dropped for t in self._subscribers)

    def subscribe(self) -> OpusPacketTrack:
        track = OpusPacketTrack(self, self.config.max_queue)
        self._subscribers.append(track)
        return track

    def unsubscribe(self, track: OpusPacketTrack) -> None:
        if track in self._subscribers:
            self._subscribers.remove(track)

    def on_packet(self, packet: RtpPacket) -> None:
        """One RTP packet from the publisher (already SRTP-decrypted, RTX-unwrapped)."""
        if self.closed or not packet.payload:
            return
        now = time.monotonic()
        if packet.ssrc != self._ssrc:
            if self._ssrc is not None:
                self._restart(packet, now)
            self._ssrc = packet.ssrc
        rel = self._unwrap.rel(packet.timestamp)
        self._clock.audio.observe(rel, now)
        self.packets_in += 1
        self.bytes_in += len(packet.payload)
        self.last_packet_s = now
        if not self._subscribers:
            return
        out = av.Packet(packet.payload)
        out.pts = rel
        out.time_base = AUDIO_TIME_BASE
        for track in self._subscribers:
            track.offer(out)
        self.packets_relayed += len(self._subscribers)

    def _restart(self, packet: RtpPacket, now: float) -> None:
        """A new source (the publisher replaced its track): its timestamps start anywhere. Outgoing
        timestamps continue from where they were plus the time that passed, so viewers see one stream,
        and the capture estimate starts over."""
        elapsed = 0.0 if self.last_packet_s is None else max(0.0, now - self.last_packet_s)
        rel = self._unwrap.last_rel + max(AUDIO_RATE // 50, int(elapsed * AUDIO_RATE))
        self._unwrap = Unwrapper(first=(packet.timestamp - rel) & 0xFFFFFFFF, last_rel=rel)
        self._clock.audio.offset = None
        self._clock.audio.publisher_offset = None

    def on_sender_report(self, ntp_s: float, rtp_timestamp: int) -> None:
        """The publisher's SR for its audio: its own NTP <-> RTP mapping (see `CaptureClock`)."""
        if self._unwrap.first is None:
            return
        rel = self._unwrap.near(rtp_timestamp - self._unwrap.first)
        self._clock.audio.publisher_report(ntp_s, rel, time.monotonic())

    def capture_ntp(self, rel: int) -> int | None:
        """SR stamping for this relay's outgoing streams: capture NTP of media timestamp `rel`."""
        capture = self._clock.audio_capture(rel)
        return None if capture is None else self._clock.ntp64(capture)

    def close(self) -> None:
        self.closed = True
        for track in list(self._subscribers):
            track.stop()
        self._subscribers.clear()

    def stats(self) -> dict[str, object]:
        return {
            "packets_in": self.packets_in,
            "packets_relayed": self.packets_relayed,
            "bytes_in": self.bytes_in,
            "viewers": self.subscribers,
            "dropped": self.dropped,
        }
