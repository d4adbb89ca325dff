"""A session's audio and lip-sync wiring, kept out of `gateway.session` so the video loop stays readable.

Owns the session's `CaptureClock` and (when the publisher sends Opus) its `AudioRelay`, and knows the few
aiortc objects that need taps (installed by `gateway.webrtc.install`, in its order): the publisher's audio
receiver (packet tap + SR tap), its video receiver (SR tap, for the publisher's stated A/V relation), and
every outgoing sender (SR stamping: audio AND video, so both streams' reports come from the one capture
clock).
"""

from __future__ import annotations

import logging
import time
import weakref

from aiortc import RTCPeerConnection, RTCRtpReceiver, RTCRtpSender

from gateway.media.audio import AudioConfig, AudioRelay
from gateway.webrtc.install import install_sender_clock, tap_audio, tap_video_reports
from gateway.webrtc.negotiation.audio_sdp import (
    accept_publisher_audio,
    audio_transceivers,
    viewer_audio_transceiver,
)
from gateway.webrtc.sync.clocks import CaptureClock, SyncConfig, Unwrapper
from gateway.webrtc.sync.sender_clock import StampState
from gateway.webrtc.sync.taps import decoded_pts_origin

logger = logging.getLogger(__name__)


class SessionAudio:
    def __init__(self, config: AudioConfig | None = None, sync: SyncConfig | None = None) -> None:
        self.config = config or AudioConfig()
        self.clock = CaptureClock(sync)
        self.relay: AudioRelay | None = None
        self._video_receiver: RTCRtpReceiver | None = None
        self._video_unwrap = Unwrapper(first=0)
        self._stamps: weakref.WeakSet[StampState] = weakref.WeakSet()  # live senders only

    # --- publisher --------------------------------------------------------------------------------------
    def attach_publisher(self, pc: RTCPeerConnection) -> bool:
        """Call after setRemoteDescription(offer), before createAnswer. True: the session relays audio."""
        for transceiver in pc.getTransceivers():
            if transceiver.kind == "video" and self._video_receiver is None:
                self._video_receiver = transceiver.receiver
                tap_video_reports(transceiver.receiver, self._on_video_report)
        if not self.config.enabled:
            for transceiver in audio_transceivers(pc):
                transceiver.direction = "inactive"
            return False
        audio = accept_publisher_audio(pc)
        if audio is None:
            return False
        relay = AudioRelay(self.clock, self.config)
        if not tap_audio(audio.receiver, relay.on_packet, relay.on_sender_report):
            audio.direction = "inactive"
            return False
        self.relay = relay
        return True

    def on_video_frame(self, pts: int, arrival_s: float) -> None:
        """A decoded input video frame (aiortc pts, 1/90000 s) and when its last packet arrived."""
        self._video_unwrap.last_rel = max(self._video_unwrap.last_rel, pts)
        self.clock.video.observe(pts, arrival_s)

    def _on_video_report(self, ntp_s: float, rtp_timestamp: int) -> None:
        origin = decoded_pts_origin(self._video_receiver) if self._video_receiver is not None else None
        if origin is None:
            return
        pts = self._video_unwrap.near((rtp_timestamp - origin) & 0xFFFFFFFF)
        self.clock.video.publisher_report(ntp_s, pts, time.monotonic())

    # --- senders ----------------------------------------------------------------------------------------
    def stamp_video(self, sender: RTCRtpSender) -> None:
        state = install_sender_clock(sender, self._video_ntp)
        if state is not None:
            self._stamps.add(state)

    def _video_ntp(self, pts: int) -> int | None:
        capture = self.clock.video_capture(pts)
        return None if capture is None else self.clock.ntp64(capture)

    def attach_viewer(self, pc: RTCPeerConnection) -> bool:
        """Call after setRemoteDescription of a WHEP offer. True: this viewer gets the session's audio."""
        relay = self.relay if self.config.enabled else None
        transceiver = viewer_audio_transceiver(pc, relay is not None)
        if transceiver is None or relay is None:
            return False
        transceiver.sender.replaceTrack(relay.subscribe())
        state = install_sender_clock(transceiver.sender, relay.capture_ntp)
        if state is not None:
            self._stamps.add(state)
        return True

    # --- lifecycle / stats ------------------------------------------------------------------------------
    def close(self) -> None:
        if self.relay is not None:
            self.relay.close()

    def stats(self) -> dict[str, object]:
        relay = self.relay
        skew = self.clock.publisher_skew_ms()
        return {
            "audio": relay is not None,
            "audio_packets_in": relay.packets_in if relay else 0,
            "audio_packets_relayed": relay.packets_relayed if relay else 0,
            "audio_viewers": relay.subscribers if relay else 0,
            "audio_dropped": relay.dropped if relay else 0,
            "sender_reports_stamped": sum(s.stamped for s in self._stamps),
            "publisher_av_skew_ms": None if skew is None else round(skew, 1),
        }
