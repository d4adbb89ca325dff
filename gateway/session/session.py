"""A session: one publisher's peer connection, its video loop, its viewers, its audio; closed once.

The frame path is `gateway.session.video_loop`; admission and reaping are pure policies beside the manager
(`admission.py`, `reaping.py`); publishers and viewers are answered by one sequence
(`gateway.webrtc.negotiation.answer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any

from aiortc import MediaStreamTrack, RTCPeerConnection, RTCRtpReceiver
from aiortc.sdp import candidate_from_sdp

from engines.frames import FaceSettings, SourceFace
from gateway.config import SessionConfig
from gateway.control import GovernorLike
from gateway.errors import Unavailable
from gateway.marking.config import disclosure_headers
from gateway.marking.frame_marker import FrameMarker
from gateway.marking.sei import sei_nal
from gateway.media.fanout import FanoutEncoder
from gateway.media.session_audio import SessionAudio
from gateway.session.answering import answer_or_refuse
from gateway.session.ports import MonitorLike, SchedulerLike
from gateway.session.timeline import FRAME_OUT, Timeline
from gateway.session.video_loop import FrameCounters, LoopLinks, LoopSettings, VideoLoop
from gateway.webrtc.codecs.hw_encode import HardwareH264
from gateway.webrtc.codecs.libvpx import Libvpx
from gateway.webrtc.codecs.libx264 import Libx264
from gateway.webrtc.congestion import transport_cc, uplink_feedback
from gateway.webrtc.congestion.queue_delay import OneWayDelay
from gateway.webrtc.install import (
    install_sender,
    install_transport_cc_receiver,
    install_video_receiver,
    open_peer_connection,
)
from gateway.webrtc.interop.ice import IceConfig
from gateway.webrtc.negotiation.sdp import SdpError, TrickleFragment, check_offer
from gateway.webrtc.recovery.jitter_buffer import recovery_counters

logger = logging.getLogger(__name__)


class Session:
    """One WHIP publisher. `close()` is idempotent and leaves no task, thread or peer connection behind."""

    def __init__(
        self,
        session_id: str,
        pc: RTCPeerConnection,
        *,
        source: SourceFace | None,
        processors: tuple[str, ...],
        config: SessionConfig,
        scheduler: SchedulerLike,
        monitor: MonitorLike,
        governor: GovernorLike,
        executor: Executor | None,
        budget_ms: float,
        on_closed: Callable[[Session], None],
        face_settings: FaceSettings | None = None,
        libvpx: Libvpx | None = None,
        libx264: Libx264 | None = None,
        hardware_h264: HardwareH264 | None = None,
        label: str | None = None,
        post_s: float | None = None,
    ) -> None:
        self.id = session_id
        # disclosure (gateway.marking): the mark on every output frame unless --no-mark, the visible label
        self.marker = FrameMarker(config.marking, session_id) if config.marking.enabled else None
        self.label = label
        # VP8 / H.264 rate changes without a keyframe (None: FFmpeg's encoder, reopened at each rate)
        self._libvpx = libvpx
        self._libx264 = libx264
        self._hardware_h264 = hardware_h264  # NVENC where it opened at start (webrtc.codecs.hw_encode)
        self.pc = pc
        self.source = source
        self.processors = processors
        self.config = config
        self.created_s = time.monotonic()
        self.timeline = Timeline(self.created_s if post_s is None else post_s)  # its way on air
        self.connected_s: float | None = None
        # One encoder per codec in use (publisher's return + viewers); VP8 unless someone offered only H.264.
        self.encoders: dict[str, FanoutEncoder] = {}
        self.viewers: dict[str, RTCPeerConnection] = {}
        self.close_reason: str | None = None
        self.closed_s: float | None = None
        self._scheduler = scheduler
        self._monitor = monitor
        self._on_closed = on_closed
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing: asyncio.Task[None] | None = None
        self.audio = SessionAudio(config.audio)  # Opus relay + the capture clock both streams' SRs use
        self.etag = secrets.token_hex(8)
        self.owner: str | None = None  # the tenant that created it (gateway.tenants)
        self.viewer_token = secrets.token_urlsafe(24)  # WHEP may watch this session with it, nothing else
        self.uplink: uplink_feedback.UplinkFeedback | None = None  # loss-based REMB cap, once media flows
        self.uplink_delay = OneWayDelay()  # the publisher's uplink queue, from its frames' arrival times
        self.transport_cc: transport_cc.TransportCcFeedback | None = None  # when the answer negotiated it
        self.transport_cc_send: transport_cc.SendSideFeedback | None = None  # the publisher's return stream
        self._media_started = False
        # awaited first when the session closes, while its encoders still run (egress: gateway.egress)
        self.closing_hooks: list[Callable[[str], Awaitable[None]]] = []
        self.video = VideoLoop(
            LoopSettings(
                session_id=session_id,
                budget_ms=budget_ms,
                late_policy=config.late_policy,
                repeat_gap_ms=config.repeat_gap_ms,
                network_allowance_ms=config.network_allowance_ms,
            ),
            LoopLinks(
                work=lambda: (self.source, self.processors),
                encoders=lambda: self.encoders.values(),
                on_frame=self.audio.on_video_frame,
                on_ended=lambda: self.schedule_close("publisher ended"),
                marker=self.marker,
                label=lambda: self.label,
                on_air=self.on_air_step,
            ),
            scheduler=scheduler,
            monitor=monitor,
            governor=governor,
            executor=executor,
            face_settings=face_settings,
        )

    def marking_stats(self) -> dict[str, object]:
        """How this session's output is marked (/api/stats "marking")."""
        return {**(self.marker.stats() if self.marker is not None else {"mark": False}), "label": self.label}

    def disclosure_headers(self) -> dict[str, str]:
        """What the egress POST says about this stream (gateway.marking.config)."""
        return disclosure_headers(self.config.marking)

    @property
    def counters(self) -> FrameCounters:
        """Frames in, out and dropped (the video loop counts them)."""
        return self.video.counters

    @property
    def last_frame_s(self) -> float | None:
        """When the publisher's newest frame arrived (None before the first)."""
        return self.video.last_frame_s

    def on_air_step(self, name: str, at_s: float | None = None) -> None:
        """A step of the way on air (gateway.session.timeline); the monitor's session entry shows the
        timeline, and the first frame out is an event with all of it."""
        if not self.timeline.mark(name, time.monotonic() if at_s is None else at_s):
            return
        marks = self.timeline.as_ms()
        self._monitor.session_timeline(self.id, marks)
        if name == FRAME_OUT:
            self._monitor.event(
                "session_on_air",
                f"session {self.id} on air {marks[FRAME_OUT]:.0f} ms after its POST",
                session_id=self.id,
                timeline=marks,
            )

    # --- wiring ---------------------------------------------------------------------------------------------
    def start_media(self, track: MediaStreamTrack, receiver: RTCRtpReceiver) -> None:
        if self._media_started or self.close_reason is not None:
            return
        self._media_started = True  # once: other tasks (transport-cc feedback) may already be running
        self._spawn(self.video.receive(track, receiver), "receive")
        self._spawn(self.video.output(), "output")
        self.uplink = install_video_receiver(receiver, self.config.uplink, self.uplink_delay)
        if self.uplink is not None:
            self._spawn(self.uplink.run(), "uplink-rate")

    def start_transport_cc(self, pc: RTCPeerConnection) -> None:
        """Where the answer keeps transport-cc, report every video packet's arrival to the publisher
        (gateway.webrtc.congestion.transport_cc)."""
        if self.close_reason is not None:
            return
        self.transport_cc = install_transport_cc_receiver(pc)
        if self.transport_cc is not None:
            self._spawn(self.transport_cc.run(), "transport-cc")

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=f"session-{self.id}-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("session %s: %s failed: %r", self.id, task.get_name(), task.exception())
            self.schedule_close("error")

    @property
    def task_count(self) -> int:
        return len(self._tasks)

    @property
    def face_settings(self) -> FaceSettings | None:
        """What the session asked for about faces (None: the pipeline's defaults)."""
        return self.video.face_settings

    def reconfigure(
        self, source: SourceFace | None, processors: tuple[str, ...], face_settings: FaceSettings | None
    ) -> None:
        """Live control (gateway.http.control): the next frame received is processed with these. Values are
        checked by the caller; all three change together, on the loop, between two frames."""
        self.video.change_face_settings(face_settings)
        self.source = source
        self.processors = processors

    async def add_remote_candidates(self, fragment: TrickleFragment) -> None:
        """Feed trickled candidates to ICE. A different ufrag is an ICE restart, which is refused."""
        remote = self.pc.remoteDescription
        restart = remote is not None and f"a=ice-ufrag:{fragment.ufrag}" not in remote.sdp
        if fragment.ufrag is not None and restart:
            raise SdpError("ICE restart is not supported: create a new session")
        mids = [t.mid for t in self.pc.getTransceivers() if t.mid is not None]
        for mid, value in fragment.candidates:
            try:
                candidate = candidate_from_sdp(value)
            except (ValueError, IndexError) as exc:
                raise SdpError(f"malformed candidate: {exc}") from None
            candidate.sdpMid = mid if mid is not None else (mids[0] if mids else "0")
            await self.pc.addIceCandidate(candidate)
        if fragment.end_of_candidates:
            await self.pc.addIceCandidate(None)

    def encoder_for(self, codec: str) -> FanoutEncoder:
        encoder = self.encoders.get(codec)
        if encoder is None:
            encoder = self.encoders[codec] = FanoutEncoder(
                bitrate=self.config.bitrate,
                codec=codec,
                libvpx=self._libvpx,
                libx264=self._libx264,
                hardware_h264=self._hardware_h264,
            )
            encoder.keyframe_prefix = sei_nal(self.config.marking) if codec == "H264" else None
        return encoder

    def subscribe(self, pc: RTCPeerConnection, codec: str, *, publisher: bool = False) -> None:
        """Send this session's processed stream on `pc`'s video transceiver, encoded in `codec`. The
        publisher's receiver reports come back through its own uplink, behind its media: its bitrate
        feedback is corrected by the queue measured there."""
        encoder = self.encoder_for(codec)
        sender = pc.addTrack(encoder.subscribe())
        feedback = encoder.bind_sender(sender, self.uplink_delay.standing if publisher else None)
        # transport-cc where the answer has it: per-packet feedback for the bitrate policy
        side = install_sender(
            pc, sender, feedback, stamp_reports=self.audio.stamp_video, transport_cc=self.config.transport_cc
        )
        if publisher and self.config.transport_cc:
            self.transport_cc_send = side

    # --- viewers --------------------------------------------------------------------------------------------
    async def add_viewer(self, offer_sdp: str, ice: IceConfig) -> tuple[str, str]:
        offer = check_offer(offer_sdp, need_send=False)
        codec = offer.codec
        if len(self.viewers) >= self.config.max_viewers:
            raise Unavailable(f"session {self.id} already has {len(self.viewers)} viewers")
        viewer_id = secrets.token_urlsafe(12)
        pc, _ = open_peer_connection(ice, f"session {self.id} viewer {viewer_id}")
        self.viewers[viewer_id] = pc

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                await self.remove_viewer(viewer_id)

        def attach(transport_cc_lines: int) -> None:
            self.subscribe(pc, codec)
            self.audio.attach_viewer(pc)

        async def give_back() -> None:
            with _logged_failure(f"session {self.id}: closing refused viewer"):
                await self.remove_viewer(viewer_id)

        answer = await answer_or_refuse(
            pc,
            offer_sdp,
            offer,
            transport_cc=self.config.transport_cc,
            attach=attach,
            give_back=give_back,
            what="WHEP offer",
        )
        return viewer_id, answer

    async def remove_viewer(self, viewer_id: str) -> bool:
        pc = self.viewers.pop(viewer_id, None)
        if pc is None:
            return False
        for sender in pc.getSenders():
            if sender.track is not None:
                sender.track.stop()
        await pc.close()
        return True

    # --- lifecycle ------------------------------------------------------------------------------------------
    def schedule_close(self, reason: str) -> None:
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_task(self.close(reason))

    async def close(self, reason: str = "closed") -> None:
        if self.close_reason is not None:
            if self._closing is not None and self._closing is not asyncio.current_task():
                await asyncio.shield(self._closing)
            return
        self.close_reason = reason
        self.closed_s = time.monotonic()
        if self._closing is None:
            self._closing = asyncio.current_task()  # type: ignore[assignment]
        try:
            await self._release(reason)
        finally:
            # Whatever failed above (a half-built peer connection cannot always close cleanly), the session
            # leaves the manager: a session that stays listed holds an admission slot forever.
            self._on_closed(self)
            self._monitor.session_closed(self.id, reason)

    async def _release(self, reason: str) -> None:
        self._scheduler.remove_session(self.id)
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
        for hook in list(self.closing_hooks):
            with _logged_failure(f"session {self.id}: closing hook"):
                await hook(reason)
        self.audio.close()
        for viewer_id in list(self.viewers):
            with _logged_failure(f"session {self.id}: closing viewer {viewer_id}"):
                await self.remove_viewer(viewer_id)
        for encoder in self.encoders.values():
            with _logged_failure(f"session {self.id}: closing encoder"):
                encoder.close()
        with _logged_failure(f"session {self.id}: closing peer connection ({reason})"):
            await self.pc.close()
        others = [t for t in self._tasks if t is not current]
        if others:
            await asyncio.gather(*others, return_exceptions=True)

    def summary(self) -> dict[str, Any]:
        now = time.monotonic()
        return {
            "id": self.id,
            "state": self.pc.connectionState,
            "age_s": round(now - self.created_s, 3),
            "timeline_ms": self.timeline.as_ms(),
            "source": self.source.id if self.source else None,
            "processors": list(self.processors),
            "frames_in": self.counters.frames_in,
            "frames_out": self.counters.frames_out,
            "drops": dict(self.counters.drops),
            "viewers": len(self.viewers),
            "marking": self.marking_stats(),
            "audio": self.audio.stats(),
            # network: what the receivers let the encoder send; how the publisher's stream was repaired
            "send_bitrate": {codec: e.bitrate.snapshot(now) for codec, e in self.encoders.items()},
            "uplink": self.uplink.stats() if self.uplink is not None else None,
            "transport_cc": self.transport_cc.stats() if self.transport_cc is not None else None,
            "transport_cc_send": self.transport_cc_send.stats()
            if self.transport_cc_send is not None
            else None,
            # NACKed packets resent, and those the budget held back
            # (gateway.webrtc.congestion.retransmit_budget)
            "retransmits": {codec: e.retransmit_counters() for codec, e in self.encoders.items()},
            "receive_recovery": next(
                (recovery_counters(r) for r in self.pc.getReceivers() if r.track and r.track.kind == "video"),
                None,
            ),
        }


@contextlib.contextmanager
def _logged_failure(what: str) -> Any:
    """Closing goes on past a failing step (logged at WARNING with its cause, never raised)."""
    try:
        yield
    except Exception as exc:
        logger.warning("%s failed: %s: %s", what, type(exc).__name__, exc)
