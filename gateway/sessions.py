"""Sessions: one publisher peer connection, its media loops, its viewers; and the manager that admits,
finds, reaps and closes them.

Media loop of a session (all blocking work in executor threads, never on the event loop):

    receive  : newest decoded frame from aiortc (older ones drained and counted as stale) -> to RGB ->
               scheduler.submit(...) -> (frame, future) into `_pending` (bounded by the scheduler: older
               pending frames resolve stale at once)
    output   : futures awaited IN ORDER -> late policy -> YUV (the decoded frame itself, or its planes with
               only the boxes the pipeline changed converted back: media.planes) -> encode once per codec
               (FanoutEncoder), one executor hop for all -> every subscriber
               (the publisher's own sendrecv track and every WHEP viewer) -> FrameRecord to the monitor

aiortc's decoded-frame queue (`RemoteStreamTrack._queue`) is unbounded; draining it to the newest frame on
every receive is what keeps latency bounded under overload.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Protocol

import av
import numpy as np
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCRtpReceiver, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from aiortc.sdp import candidate_from_sdp

from engines.frames import (
    STAGE_SWAP,
    FaceSettings,
    FaceTrack,
    FrameItem,
    FrameOptions,
    FrameOutput,
    SourceFace,
)
from gateway.config import SessionConfig
from gateway.errors import BadRequest, NotFound, Unavailable
from gateway.media import libvpx, libx264
from gateway.media.colour import rgb_to_i420
from gateway.media.fanout import FanoutEncoder
from gateway.media.late import choose_output, repeat_due
from gateway.media.libvpx import Libvpx
from gateway.media.libx264 import Libx264
from gateway.media.planes import Box, is_i420, patched_frame
from gateway.media.queue_delay import OneWayDelay
from gateway.media.session_audio import SessionAudio
from gateway.monitoring.records import FrameRecord, LinkState, Outcome
from gateway.rtc import transport_cc, uplink_feedback
from gateway.rtc.codecs import answer_video_codec
from gateway.rtc.dtls import answer_as_dtls_server, watch_dtls
from gateway.rtc.h264 import keep_offered_h264_profiles
from gateway.rtc.ice import IceConfig, create_peer_connection
from gateway.rtc.offer_rules import make_answerable, restore_unusable_audio
from gateway.rtc.receive import frame_completed_at, measure_transit, recovery_counters
from gateway.rtc.sdp import SdpError, TrickleFragment, check_offer
from gateway.scheduler import ScheduledFrame

logger = logging.getLogger(__name__)


class SchedulerLike(Protocol):
    def submit(
        self, session_id: str, frame_id: int, item: FrameItem, arrival_s: float, deadline_s: float
    ) -> asyncio.Future[ScheduledFrame]: ...

    def remove_session(self, session_id: str) -> None: ...


class MonitorLike(Protocol):
    def record_frame(self, rec: FrameRecord) -> None: ...

    def session_opened(self, session_id: str, info: dict[str, object]) -> None: ...

    def session_closed(self, session_id: str, reason: str) -> None: ...

    def session_link(self, session_id: str, link: LinkState) -> None: ...

    def record_reject(self, reason: str) -> None: ...

    def event(self, kind: str, message: str, **data: Any) -> None: ...

    def frame_options(self, requested: tuple[str, ...]) -> FrameOptions: ...

    def admits_new_sessions(self) -> bool: ...

    def session_stats(self, session_id: str) -> dict[str, Any]: ...


@dataclass
class _Pending:
    frame_id: int
    arrival_s: float
    pts: int
    image: np.ndarray
    decode_ms: float
    future: asyncio.Future[ScheduledFrame]
    decoded: av.VideoFrame | None = None  # the frame as decoded, when its planes can be reused (is_i420)


@dataclass
class SessionCounters:
    frames_in: int = 0
    frames_out: int = 0
    drops: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str, n: int = 1) -> None:
        self.drops[reason] = self.drops.get(reason, 0) + n


def _needs_pipeline(options: FrameOptions, source: SourceFace | None) -> bool:
    """Pass-through frames (no processors, or a swap with no source face) skip the batcher: waiting
    `max_queue_delay_ms` for batch partners would only add latency to a frame nobody works on."""
    wanted = set(options.processors)
    return bool(wanted - {STAGE_SWAP}) or (STAGE_SWAP in wanted and source is not None)


def _passed_through(image: np.ndarray) -> ScheduledFrame:
    output = FrameOutput(image=image, faces=0, changed=())
    return ScheduledFrame(Outcome.PROCESSED, output, queue_wait_ms=0.0, batch_size=0, process_ms=0.0)


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
        executor: Executor | None,
        budget_ms: float,
        on_closed: Callable[[Session], None],
        face_settings: FaceSettings | None = None,
        libvpx: Libvpx | None = None,
        libx264: Libx264 | None = None,
    ) -> None:
        self.id = session_id
        # VP8 / H.264 rate changes without a keyframe (None: FFmpeg's encoder, reopened at each rate)
        self._libvpx = libvpx
        self._libx264 = libx264
        self.pc = pc
        self.source = source
        self.processors = processors
        self.config = config
        self.created_s = time.monotonic()
        self.connected_s: float | None = None
        self.last_frame_s: float | None = None
        self.counters = SessionCounters()
        # One encoder per codec in use (publisher's return + viewers); VP8 unless someone offered only H.264.
        self.encoders: dict[str, FanoutEncoder] = {}
        self.viewers: dict[str, RTCPeerConnection] = {}
        self.close_reason: str | None = None
        self.closed_s: float | None = None
        self._scheduler = scheduler
        self._monitor = monitor
        self._executor = executor
        self._budget_s = budget_ms / 1000.0
        self._encode_ewma_s = 0.0  # measured encode time, reserved out of every frame's deadline
        self._on_closed = on_closed
        self._face_track = FaceTrack(settings=face_settings)  # None: the pipeline's defaults
        self._pending: asyncio.Queue[_Pending | None] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()
        self._frame_ids = itertools.count()
        self._last_processed: np.ndarray | None = None
        self._last_yuv: av.VideoFrame | None = None  # what _last_processed was encoded from
        self._last_sent_s: float | None = None  # when a picture last went to the encoders
        self._link_reported_s = float("-inf")
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

    # --- wiring ---------------------------------------------------------------------------------------------
    def start_media(self, track: MediaStreamTrack, receiver: RTCRtpReceiver) -> None:
        if self._media_started or self.close_reason is not None:
            return
        self._media_started = True  # once: other tasks (transport-cc feedback) may already be running
        self._spawn(self._receive_loop(track, receiver), "receive")
        self._spawn(self._output_loop(), "output")
        measure_transit(receiver, self.uplink_delay)
        self.uplink = uplink_feedback.install(receiver, self.config.uplink, self.uplink_delay)
        if self.uplink is not None:
            self._spawn(self.uplink.run(), "uplink-rate")

    def start_transport_cc(self, pc: RTCPeerConnection) -> None:
        """Negotiate transport-cc where the offer has it (before the answer is made) and report every video
        packet's arrival to the publisher (gateway.rtc.transport_cc)."""
        if transport_cc.answer_transport_cc(pc) == 0 or self.close_reason is not None:
            return
        receiver = next((t.receiver for t in pc.getTransceivers() if t.kind == "video"), None)
        self.transport_cc = transport_cc.install(receiver) if receiver is not None else None
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
        return self._face_track.settings

    def reconfigure(
        self, source: SourceFace | None, processors: tuple[str, ...], face_settings: FaceSettings | None
    ) -> None:
        """Live control (gateway.http.control): the next frame received is processed with these. Values are
        checked by the caller; all three change together, on the loop, between two frames."""
        if face_settings != self._face_track.settings:
            self._face_track.settings = face_settings
            self._face_track.selected_id = None  # `one` chooses again among the faces it tracks
        self.source = source
        self.processors = processors

    # --- media ----------------------------------------------------------------------------------------------
    async def _receive_loop(self, track: MediaStreamTrack, receiver: RTCRtpReceiver) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] | None = getattr(track, "_queue", None)
        frame: av.VideoFrame
        try:
            while True:
                try:
                    frame = await track.recv()  # type: ignore[assignment]
                except MediaStreamError:
                    break
                ended = False
                while queue is not None and not queue.empty():  # live video never queues: keep the newest
                    newer = queue.get_nowait()
                    if newer is None:
                        ended = True
                        break
                    self._record_drop(self._next_frame_id(), time.monotonic(), Outcome.DROPPED_STALE, frame)
                    frame = newer
                arrival = time.monotonic()
                self.last_frame_s = arrival
                frame_id = self._next_frame_id()
                completed = frame_completed_at(receiver, frame.pts)
                self.audio.on_video_frame(int(frame.pts or 0), arrival if completed is None else completed)
                image = await loop.run_in_executor(self._executor, _to_rgb, frame)
                decode_ms = (time.monotonic() - (completed if completed is not None else arrival)) * 1000.0
                options = self._monitor.frame_options(self.processors)
                if _needs_pipeline(options, self.source):
                    # capture time ~ when its last packet came (before decode): smoothing and the crop's lead
                    # measure motion between frames as they were filmed, not as they happened to be scheduled
                    item = FrameItem(
                        image=image,
                        source=self.source,
                        options=options,
                        track=self._face_track,
                        time_s=completed if completed is not None else arrival,
                    )
                    future = self._scheduler.submit(
                        self.id, frame_id, item, arrival, self._deadline(arrival, completed)
                    )
                else:
                    future = loop.create_future()
                    future.set_result(_passed_through(image))
                self.counters.frames_in += 1
                self._pending.put_nowait(
                    _Pending(
                        frame_id,
                        arrival,
                        int(frame.pts or 0),
                        image,
                        decode_ms,
                        future,
                        frame if is_i420(frame) else None,
                    )
                )
                if ended:
                    break
        finally:
            self._pending.put_nowait(None)
            self.schedule_close("publisher ended")

    def _deadline(self, arrival: float, completed: float | None) -> float:
        """The budget is end to end: count from when the frame's last packet arrived (before decode), and
        keep back what still follows processing — our encode (measured) and the trip to the client
        (`network_allowance_ms`) — so a frame that is processed at all is delivered within the budget."""
        start = completed if completed is not None and completed <= arrival else arrival
        reserve = self._encode_ewma_s + self.config.network_allowance_ms / 1000.0
        return start + max(self._budget_s - reserve, self._budget_s / 2)

    def _next_frame_id(self) -> int:
        return next(self._frame_ids)

    def _record_drop(self, frame_id: int, arrival: float, outcome: Outcome, frame: av.VideoFrame) -> None:
        self.counters.drop(str(outcome))
        self._monitor.record_frame(
            FrameRecord(
                session_id=self.id,
                frame_id=frame_id,
                arrival_s=arrival,
                outcome=outcome,
                width=frame.width,
                height=frame.height,
            )
        )

    async def _output_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            pending = await self._pending.get()
            if pending is None:
                return
            result = await pending.future
            output: FrameOutput | None = result.output
            image = choose_output(
                result.outcome,
                output.image if output is not None else None,
                pending.image,
                self._last_processed,
                self.config.late_policy,
            )
            since_sent = None if self._last_sent_s is None else time.monotonic() - self._last_sent_s
            if image is self._last_processed and not repeat_due(
                result.outcome, since_sent, self.config.repeat_gap_ms / 1000.0
            ):
                image = None  # the viewer still holds this picture: a repeat now would cost CPU for nothing
            base, changed = _yuv_source(image, pending, output, self._last_processed, self._last_yuv)
            if result.outcome is Outcome.PROCESSED and image is not None:
                self._last_processed, self._last_yuv = image, None
            else:
                self.counters.drop(str(result.outcome))
            stages: dict[str, float] = {"decode": pending.decode_ms, "queue_wait": result.queue_wait_ms}
            if output is not None:
                stages.update(output.timings_ms)
            server_ms = (time.monotonic() - pending.arrival_s) * 1000.0
            if image is not None:
                t0 = time.monotonic()
                encoders = [e for e in self.encoders.values() if e.subscribers]
                for encoder in encoders:
                    encoder.fit_size(image.shape[1], image.shape[0])
                yuv, encoded = await loop.run_in_executor(
                    self._executor, _encode, encoders, image, base, changed, pending.pts
                )
                if image is self._last_processed:
                    self._last_yuv = yuv
                encode_s = time.monotonic() - t0
                stages["encode"] = encode_s * 1000.0
                self._encode_ewma_s += 0.1 * (encode_s - self._encode_ewma_s)
                for encoder, packets in zip(encoders, encoded, strict=True):
                    encoder.publish(packets)
                self.counters.frames_out += 1
                self._last_sent_s = time.monotonic()
                self._report_link(self._last_sent_s)
            height, width = pending.image.shape[:2]
            self._monitor.record_frame(
                FrameRecord(
                    session_id=self.id,
                    frame_id=pending.frame_id,
                    arrival_s=pending.arrival_s,
                    outcome=result.outcome,
                    server_ms=server_ms,
                    stages_ms=stages,
                    batch_sizes=dict(output.batch_sizes) if output is not None else {},
                    faces=output.faces if output is not None else 0,
                    width=width,
                    height=height,
                )
            )

    def _report_link(self, now: float, every_s: float = 1.0) -> None:
        """Tell the monitor, about once a second, what the processed stream is set to send and the worst path
        among its receivers (the dashboard's and Prometheus's per-session network view)."""
        if now - self._link_reported_s < every_s:
            return
        self._link_reported_s = now
        sending = [e.bitrate for e in self.encoders.values() if e.subscribers]
        paths = [policy.worst_path() for policy in sending]
        queues = [queue for queue, _ in paths if queue is not None]
        losses = [loss for _, loss in paths if loss is not None]
        self._monitor.session_link(
            self.id,
            LinkState(
                send_bps=sum(policy.current_bps for policy in sending),
                queue_s=max(queues, default=None),
                loss=max(losses, default=None),
            ),
        )

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
                bitrate=self.config.bitrate, codec=codec, libvpx=self._libvpx, libx264=self._libx264
            )
        return encoder

    def subscribe(self, pc: RTCPeerConnection, codec: str, *, publisher: bool = False) -> None:
        """Send this session's processed stream on `pc`'s video transceiver, encoded in `codec`. The
        publisher's receiver reports come back through its own uplink, behind its media: its bitrate
        feedback is corrected by the queue measured there."""
        encoder = self.encoder_for(codec)
        sender = pc.addTrack(encoder.subscribe())
        encoder.bind_sender(sender, self.uplink_delay.standing if publisher else None)
        self.audio.stamp_video(sender)
        if self.config.transport_cc:  # where the answer has it: per-packet feedback for the bitrate policy
            side = transport_cc.install_send_side(pc, sender, encoder.transit_sink(sender))
            if publisher:
                self.transport_cc_send = side

    # --- viewers --------------------------------------------------------------------------------------------
    async def add_viewer(self, offer_sdp: str, ice: IceConfig) -> tuple[str, str]:
        offer = check_offer(offer_sdp, need_send=False)
        codec = offer.codec
        if len(self.viewers) >= self.config.max_viewers:
            raise Unavailable(f"session {self.id} already has {len(self.viewers)} viewers")
        viewer_id = secrets.token_urlsafe(12)
        pc = create_peer_connection(ice)
        watch_dtls(pc, f"session {self.id} viewer {viewer_id}")
        self.viewers[viewer_id] = pc

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                await self.remove_viewer(viewer_id)

        try:
            await pc.setRemoteDescription(
                RTCSessionDescription(sdp=make_answerable(offer_sdp, offer.structure), type="offer")
            )
            answer_as_dtls_server(pc)
            keep_offered_h264_profiles(pc)
            answer_video_codec(pc, codec)
            if self.config.transport_cc:
                transport_cc.answer_transport_cc(pc)
            self.subscribe(pc, codec)
            self.audio.attach_viewer(pc)
            await pc.setLocalDescription(await pc.createAnswer())
            answer = restore_unusable_audio(pc.localDescription.sdp, offer.structure)
        except BaseException as exc:
            with _logged_failure(f"session {self.id}: closing refused viewer"):
                await asyncio.shield(self.remove_viewer(viewer_id))
            if not isinstance(exc, Exception):
                raise
            raise BadRequest(f"cannot answer WHEP offer: {type(exc).__name__}: {exc}") from None
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
            "source": self.source.id if self.source else None,
            "processors": list(self.processors),
            "frames_in": self.counters.frames_in,
            "frames_out": self.counters.frames_out,
            "drops": dict(self.counters.drops),
            "viewers": len(self.viewers),
            "audio": self.audio.stats(),
            # network: what the receivers let the encoder send; how the publisher's stream was repaired
            "send_bitrate": {codec: e.bitrate.snapshot(now) for codec, e in self.encoders.items()},
            "uplink": self.uplink.stats() if self.uplink is not None else None,
            "transport_cc": self.transport_cc.stats() if self.transport_cc is not None else None,
            "transport_cc_send": self.transport_cc_send.stats()
            if self.transport_cc_send is not None
            else None,
            # NACKed packets resent, and those the budget held back (gateway.media.retransmit_budget)
            "retransmits": {codec: e.retransmit_counters() for codec, e in self.encoders.items()},
            "receive_recovery": next(
                (recovery_counters(r) for r in self.pc.getReceivers() if r.track and r.track.kind == "video"),
                None,
            ),
        }


def _live_bitrate_libraries(config: SessionConfig) -> tuple[Libvpx | None, Libx264 | None]:
    """The libvpx and libx264 that change VP8 / H.264 rates between frames, when configured and loadable
    (said once, here)."""
    if not config.live_bitrate:
        logger.info("bitrate changes reopen FFmpeg's encoders, with a keyframe (--no-live-bitrate)")
        return None, None
    vpx = libvpx.load()
    if vpx is None:
        logger.warning("no usable libvpx: VP8 bitrate changes reopen FFmpeg's encoder, with a keyframe")
    else:
        logger.info("VP8 bitrate changes between frames through libvpx %s (%s)", vpx.version, vpx.path)
    x264 = libx264.load()
    if x264 is None:
        logger.warning("no usable libx264: H.264 bitrate changes reopen FFmpeg's encoder, with a keyframe")
    else:
        logger.info(
            "H.264 bitrate changes between frames through libx264 build %d (%s)", x264.build, x264.path
        )
    return vpx, x264


@contextlib.contextmanager
def _logged_failure(what: str) -> Any:
    """Closing goes on past a failing step (logged at WARNING with its cause, never raised)."""
    try:
        yield
    except Exception as exc:
        logger.warning("%s failed: %s: %s", what, type(exc).__name__, exc)


def _to_rgb(frame: av.VideoFrame) -> np.ndarray:
    return frame.to_ndarray(format="rgb24")


def _yuv_source(
    image: np.ndarray | None,
    pending: _Pending,
    output: FrameOutput | None,
    last_processed: np.ndarray | None,
    last_yuv: av.VideoFrame | None,
) -> tuple[av.VideoFrame | None, tuple[Box, ...] | None]:
    """What `image`'s YUV can be built from: (the frame it was made from, boxes changed since), or
    (None, None) for a whole-frame conversion. Only the pipeline's own word (`FrameOutput.changed`) marks a
    processed image as unchanged: an image that is merely the same array may have been written in place."""
    if image is None:
        return None, None
    if output is not None and image is output.image:  # processed (and not resized by `fit`)
        return (pending.decoded, output.changed) if output.changed is not None else (None, None)
    if image is pending.image:  # late policy `original`: the input as decoded
        return pending.decoded, ()
    if image is last_processed and last_yuv is not None:  # late policy `repeat`
        return last_yuv, ()
    return None, None


def _encode(
    encoders: Sequence[FanoutEncoder],
    image: np.ndarray,
    base: av.VideoFrame | None,
    changed: tuple[Box, ...] | None,
    pts: int,
) -> tuple[av.VideoFrame | None, list[list[av.Packet]]]:
    """One worker-thread hop per frame: the YUV frame once (reused, patched or converted whole), then every
    codec's encode of it."""
    if not encoders:
        return None, []
    h, w = image.shape[:2]
    yuv: av.VideoFrame | None = None
    if base is not None and changed is not None and (base.height, base.width) == (h, w) and is_i420(base):
        yuv = patched_frame(base, image, changed)
    else:
        i420 = rgb_to_i420(image)  # None for odd sizes: each encoder converts from RGB itself
        yuv = av.VideoFrame.from_ndarray(i420, format="yuv420p") if i420 is not None else None
    return yuv, [e.encode(image, pts, yuv) for e in encoders]


class SessionManager:
    """Admits, finds, reaps and closes sessions. All methods run on the event loop."""

    def __init__(
        self,
        config: SessionConfig,
        ice: IceConfig,
        scheduler: SchedulerLike,
        monitor: MonitorLike,
        *,
        budget_ms: float,
        executor: Executor | None = None,
    ) -> None:
        self.config = config
        self.ice = ice
        self._scheduler = scheduler
        self._monitor = monitor
        self._budget_ms = budget_ms
        self._executor = executor
        self.sessions: dict[str, Session] = {}
        self.accepting = True
        self.libvpx, self.libx264 = _live_bitrate_libraries(config)
        self._reaper: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_loop(), name="session-reaper")

    def get(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None or session.close_reason is not None:
            raise NotFound(f"no session {session_id!r}")
        return session

    def pending(self) -> list[Session]:
        """Sessions answered but not (yet) connected, oldest first."""
        waiting = [s for s in self.sessions.values() if s.connected_s is None and s.close_reason is None]
        return sorted(waiting, key=lambda s: s.created_s)

    def admit(self, owner: str | None = None, owner_limit: int | None = None) -> None:
        """Raise Unavailable when a new session cannot be taken now (shutting down, full, overloaded).

        Not-yet-connected sessions also count against the smaller `max_pending` budget: offers that never
        connect (a scanner, a broken client) can hold at most that many slots. When it is full, the oldest
        pending session that has had `pending_grace_s` to connect gives its slot to the newcomer, so such
        offers delay a real publisher by at most one retry instead of locking it out."""
        if not self.accepting:
            raise Unavailable("gateway is shutting down", retry_after_s=30)
        if owner_limit is not None:
            mine = sum(1 for s in self.sessions.values() if s.owner == owner and s.close_reason is None)
            if mine >= owner_limit:
                self._monitor.record_reject("tenant_limit")
                raise Unavailable(f"tenant {owner} is at its limit ({owner_limit} sessions)", retry_after_s=5)
        pending = self.pending()
        if len(pending) >= self.config.max_pending:
            oldest = pending[0]
            if time.monotonic() - oldest.created_s < self.config.pending_grace_s:
                self._monitor.record_reject("pending")
                raise Unavailable(
                    f"too many sessions still connecting ({self.config.max_pending})", retry_after_s=2
                )
            self._forget(oldest)  # its slot is free now; its peer connection closes in the background
            oldest.schedule_close("evicted: never connected, pending budget full")
        if len(self.sessions) >= self.config.max_sessions:
            self._monitor.record_reject("capacity")
            raise Unavailable(f"at capacity ({self.config.max_sessions} sessions)", retry_after_s=10)
        if not self._monitor.admits_new_sessions():
            self._monitor.record_reject("capacity")
            raise Unavailable("overloaded: the monitor refuses new sessions for now", retry_after_s=10)

    async def create(
        self,
        offer_sdp: str,
        *,
        source: SourceFace | None,
        processors: Sequence[str],
        owner: str | None = None,
        owner_limit: int | None = None,
        face_settings: FaceSettings | None = None,
    ) -> tuple[Session, str]:
        """Answer a WHIP offer: returns the session and the SDP answer (ICE candidates included)."""
        offer = check_offer(offer_sdp, need_send=True)  # a bad offer never costs a slot, or an eviction
        self.admit(owner, owner_limit)
        session_id = secrets.token_urlsafe(12)
        pc = create_peer_connection(self.ice)
        dtls = watch_dtls(pc, f"session {session_id}")
        session = Session(
            session_id,
            pc,
            source=source,
            processors=tuple(processors),
            config=self.config,
            scheduler=self._scheduler,
            monitor=self._monitor,
            executor=self._executor,
            budget_ms=self._budget_ms,
            on_closed=self._forget,
            face_settings=face_settings,
            libvpx=self.libvpx,
            libx264=self.libx264,
        )
        session.owner = owner
        self.sessions[session_id] = session

        @pc.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            if track.kind == "video":
                receiver = next((t.receiver for t in pc.getTransceivers() if t.receiver.track is track), None)
                if receiver is not None:
                    session.start_media(track, receiver)

        @pc.on("connectionstatechange")
        def on_state() -> None:
            if pc.connectionState == "connected" and session.connected_s is None:
                session.connected_s = time.monotonic()
            elif pc.connectionState in ("failed", "closed"):
                session.schedule_close(dtls.close_reason(pc.connectionState))

        try:
            await pc.setRemoteDescription(
                RTCSessionDescription(sdp=make_answerable(offer_sdp, offer.structure), type="offer")
            )
            answer_as_dtls_server(pc)
            keep_offered_h264_profiles(pc)
            answer_video_codec(pc, offer.codec)
            if self.config.transport_cc:
                session.start_transport_cc(pc)
            video = next(t for t in pc.getTransceivers() if t.kind == "video")
            if video.direction in ("sendrecv", "recvonly"):  # our view: we receive, and send back if asked
                session.subscribe(pc, offer.codec, publisher=True)
            # every audio m-line is answered by attach_publisher: Opus recvonly, anything else inactive
            session.audio.attach_publisher(pc)
            await pc.setLocalDescription(await pc.createAnswer())
            answer = restore_unusable_audio(pc.localDescription.sdp, offer.structure)
        except BaseException as exc:
            # every failure (a cancelled request included) gives the slot back before it propagates
            await asyncio.shield(session.close("bad offer"))
            if not isinstance(exc, Exception):
                raise
            logger.info("WHIP offer refused: %s: %s", type(exc).__name__, exc)
            raise BadRequest(f"cannot answer WHIP offer: {type(exc).__name__}: {exc}") from None
        self._monitor.session_opened(
            session_id, {"source": source.id if source else None, "processors": list(processors)}
        )
        return session, answer

    def _forget(self, session: Session) -> None:
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]

    async def delete(self, session_id: str) -> None:
        session = self.get(session_id)
        await session.close("deleted by client")

    def reap_once(self, now: float) -> list[str]:
        """Close sessions whose peer vanished: never connected in time, or silent/disconnected too long.
        A session in ANY state past its deadline goes, and one whose close has hung past
        `connect_timeout_s` is dropped from the table (its slot must not stay taken)."""
        victims = []
        for session in list(self.sessions.values()):
            state = session.pc.connectionState
            if session.close_reason is not None:
                if session.closed_s is not None and now - session.closed_s > self.config.connect_timeout_s:
                    logger.warning("session %s: close hung (%s); dropped", session.id, session.close_reason)
                    self._forget(session)
                    victims.append(session.id)
                continue
            if state in ("failed", "closed"):
                reason = f"peer {state}"
            elif session.connected_s is None and now - session.created_s > self.config.connect_timeout_s:
                reason = "never connected"
            elif (
                session.connected_s is not None
                and now - max(session.last_frame_s or session.connected_s, session.connected_s)
                > self.config.reap_after_s
            ):
                reason = f"no media for {self.config.reap_after_s:g}s ({state})"
            else:
                continue
            victims.append(session.id)
            session.schedule_close(reason)
        return victims

    async def _reap_loop(self) -> None:
        interval = min(1.0, self.config.reap_after_s / 4)
        while True:
            await asyncio.sleep(interval)
            self.reap_once(time.monotonic())

    def counts(self) -> dict[str, int]:
        return {
            "sessions": len(self.sessions),
            "viewers": sum(len(s.viewers) for s in self.sessions.values()),
            "tasks": sum(s.task_count for s in self.sessions.values()),
        }

    async def close(self) -> None:
        """Refuse new sessions, close every session and the reaper. Idempotent."""
        self.accepting = False
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        await asyncio.gather(
            *(s.close("gateway shutdown") for s in list(self.sessions.values())), return_exceptions=True
        )
