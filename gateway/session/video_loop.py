"""A session's video loop: the whole path of a frame, from the publisher to every consumer.

    receive : the newest decoded frame (older ones drained, counted stale) -> RGB -> the governor's options
              -> scheduler.submit (pass-through frames skip it) -> (frame, future) in arrival order
    output  : futures awaited IN ORDER -> late policy (repeat / original) -> YUV (the decoded planes reused
              where the pipeline changed nothing) -> encode once per codec, one executor hop for all ->
              every consumer of the encoded packets (the publisher's return track, every WHEP viewer)
              -> a FrameRecord to the monitor
All blocking work runs in executor threads, never on the event loop. The loop owns its frame counters; what
it needs of its session comes in as `LoopSettings` (fixed for its life) and `LoopLinks` (read or told at each
frame: live control changes the face work between two frames), so it never holds the session itself.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

import av
import numpy as np
from aiortc import MediaStreamTrack, RTCRtpReceiver
from aiortc.mediastreams import MediaStreamError
from av.video.reformatter import VideoReformatter

from engines.frames import (
    STAGE_SWAP,
    Box,
    FaceSettings,
    FaceTrack,
    FrameItem,
    FrameOptions,
    FrameOutput,
    SourceFace,
)
from gateway.control import GovernorLike
from gateway.marking.frame_marker import FrameMarker
from gateway.marking.label import draw_label, draw_label_i420
from gateway.media.colour import rgb_to_i420
from gateway.media.fanout import FanoutEncoder
from gateway.media.late import LatePolicy, choose_output, repeat_due
from gateway.media.planes import copied, is_i420, patched_frame
from gateway.monitoring.records import FrameRecord, LinkState, Outcome
from gateway.scheduler import ScheduledFrame
from gateway.session.ports import MonitorLike, SchedulerLike
from gateway.session.timeline import FRAME_IN, FRAME_OUT, SWAP_OUT
from gateway.webrtc.compat import decoded_queue
from gateway.webrtc.recovery.jitter_buffer import frame_completed_at


@dataclass
class FrameCounters:
    """Frames in, frames sent, frames dropped by reason (the session's summary shows them)."""

    frames_in: int = 0
    frames_out: int = 0
    drops: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str, n: int = 1) -> None:
        self.drops[reason] = self.drops.get(reason, 0) + n


@dataclass(frozen=True)
class LoopSettings:
    """The session's configuration as the loop uses it (fixed for the session's life)."""

    session_id: str
    budget_ms: float
    late_policy: LatePolicy
    repeat_gap_ms: float
    network_allowance_ms: float  # kept back from the budget for the trip back to the client


@dataclass(frozen=True)
class LoopLinks:
    """What the loop reads from its session and tells it, frame by frame."""

    work: Callable[[], tuple[SourceFace | None, tuple[str, ...]]]  # source face, processors: the next frame's
    encoders: Callable[[], Iterable[FanoutEncoder]]  # one per codec in use (publisher's return + viewers)
    on_frame: Callable[
        [int, float], None
    ]  # a decoded frame's pts and when its last packet arrived (A/V clock)
    on_ended: Callable[[], None]  # the publisher's track ended
    # disclosure (gateway.marking): the invisible mark (None: --no-mark) and the visible label of the next
    # frame (None: none); both written on the I420 frame every codec encodes
    marker: FrameMarker | None = None
    label: Callable[[], str | None] = lambda: None
    # a step of the way on air (gateway.session.timeline) and when it happened: first frame in, out, swapped
    on_air: Callable[[str, float], None] = lambda _name, _at: None


@dataclass
class _Pending:
    frame_id: int
    arrival_s: float
    pts: int
    image: np.ndarray
    decode_ms: float
    future: asyncio.Future[ScheduledFrame]
    decoded: av.VideoFrame | None = None  # the frame as decoded, when its planes can be reused (is_i420)


def _needs_pipeline(options: FrameOptions, source: SourceFace | None) -> bool:
    """Pass-through frames (no processors, or a swap with no source face) skip the batcher: waiting
    `max_queue_delay_ms` for batch partners would only add latency to a frame nobody works on."""
    wanted = set(options.processors)
    return bool(wanted - {STAGE_SWAP}) or (STAGE_SWAP in wanted and source is not None)


def _passed_through(image: np.ndarray) -> ScheduledFrame:
    output = FrameOutput(image=image, faces=0, changed=())
    return ScheduledFrame(Outcome.PROCESSED, output, queue_wait_ms=0.0, batch_size=0, process_ms=0.0)


class VideoLoop:
    """The receive and output loops of one session (see the module docstring)."""

    def __init__(
        self,
        settings: LoopSettings,
        links: LoopLinks,
        *,
        scheduler: SchedulerLike,
        monitor: MonitorLike,
        governor: GovernorLike,
        executor: Executor | None,
        face_settings: FaceSettings | None = None,
    ) -> None:
        self._settings = settings
        self._links = links
        self._scheduler = scheduler
        self._monitor = monitor
        self._governor = governor
        self._executor = executor
        self.counters = FrameCounters()
        self.last_frame_s: float | None = None  # when the newest frame arrived (the reaper reads it)
        self._budget_s = settings.budget_ms / 1000.0
        self._encode_ewma_s = 0.0  # measured encode time, reserved out of every frame's deadline
        self._face_track = FaceTrack(settings=face_settings)  # None: the pipeline's defaults
        self._pending: asyncio.Queue[_Pending | None] = asyncio.Queue()
        self._frame_ids = itertools.count()
        self._last_processed: np.ndarray | None = None
        self._last_yuv: av.VideoFrame | None = None  # what _last_processed was encoded from
        self._last_sent_s: float | None = None  # when a picture last went to the encoders
        # One RGB converter for the session's life. A frame's own `to_ndarray(format=...)` makes a fresh
        # libswscale context per frame, with its own threads, alive until that frame is collected: threads
        # started and ended at every frame, and more of them alive the longer frames are held.
        self._rgb = VideoReformatter()
        self._link_reported_s = float("-inf")

    @property
    def face_settings(self) -> FaceSettings | None:
        """What the session asked for about faces (None: the pipeline's defaults)."""
        return self._face_track.settings

    def change_face_settings(self, face_settings: FaceSettings | None) -> None:
        """From the next frame on (live control); `one` chooses again among the faces it tracks."""
        if face_settings != self._face_track.settings:
            self._face_track.settings = face_settings
            self._face_track.selected_id = None

    async def receive(self, track: MediaStreamTrack, receiver: RTCRtpReceiver) -> None:
        links, session_id = self._links, self._settings.session_id
        loop = asyncio.get_running_loop()
        queue = decoded_queue(track)
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
                links.on_frame(int(frame.pts or 0), arrival if completed is None else completed)
                if self.counters.frames_in == 0:
                    links.on_air(FRAME_IN, arrival if completed is None else completed)
                image = await loop.run_in_executor(self._executor, _to_rgb, self._rgb, frame)
                decode_ms = (time.monotonic() - (completed if completed is not None else arrival)) * 1000.0
                source, processors = links.work()
                options = self._governor.frame_options(processors)
                if _needs_pipeline(options, source):
                    # capture time ~ when its last packet came (before decode): smoothing and the crop's lead
                    # measure motion between frames as they were filmed, not as they happened to be scheduled
                    item = FrameItem(
                        image=image,
                        source=source,
                        options=options,
                        track=self._face_track,
                        time_s=completed if completed is not None else arrival,
                    )
                    future = self._scheduler.submit(
                        session_id, frame_id, item, arrival, self._deadline(arrival, completed)
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
            links.on_ended()

    def _deadline(self, arrival: float, completed: float | None) -> float:
        """The budget is end to end: count from when the frame's last packet arrived (before decode), and
        keep back what still follows processing — our encode (measured) and the trip to the client
        (`network_allowance_ms`) — so a frame that is processed at all is delivered within the budget."""
        start = completed if completed is not None and completed <= arrival else arrival
        reserve = self._encode_ewma_s + self._settings.network_allowance_ms / 1000.0
        return start + max(self._budget_s - reserve, self._budget_s / 2)

    def _next_frame_id(self) -> int:
        return next(self._frame_ids)

    def _record_drop(self, frame_id: int, arrival: float, outcome: Outcome, frame: av.VideoFrame) -> None:
        self.counters.drop(str(outcome))
        self._monitor.record_frame(
            FrameRecord(
                session_id=self._settings.session_id,
                frame_id=frame_id,
                arrival_s=arrival,
                outcome=outcome,
                width=frame.width,
                height=frame.height,
            )
        )

    async def output(self) -> None:
        settings = self._settings
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
                settings.late_policy,
            )
            since_sent = None if self._last_sent_s is None else time.monotonic() - self._last_sent_s
            if image is self._last_processed and not repeat_due(
                result.outcome, since_sent, settings.repeat_gap_ms / 1000.0
            ):
                image = None  # the viewer still holds this picture: a repeat now would cost CPU for nothing
            base, changed = _yuv_source(image, pending, output, self._last_processed, self._last_yuv)
            made = output.changed_i420 if output is not None and image is output.image else None
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
                encoders = [e for e in self._links.encoders() if e.subscribers]
                for encoder in encoders:
                    encoder.fit_size(image.shape[1], image.shape[0])
                disclosure = _Disclosure(
                    self._links.marker, self._links.label(), base is not None and base is self._last_yuv
                )
                yuv, encoded, mark_ms = await loop.run_in_executor(
                    self._executor, _encode, encoders, image, base, changed, pending.pts, made, disclosure
                )
                if disclosure.active:
                    stages["mark"] = mark_ms
                if image is self._last_processed:
                    self._last_yuv = yuv
                encode_s = time.monotonic() - t0
                stages["encode"] = encode_s * 1000.0
                self._encode_ewma_s += 0.1 * (encode_s - self._encode_ewma_s)
                for encoder, packets in zip(encoders, encoded, strict=True):
                    encoder.publish(packets)
                self.counters.frames_out += 1
                self._last_sent_s = time.monotonic()
                self._links.on_air(FRAME_OUT, self._last_sent_s)
                if output is not None and image is output.image and output.faces > 0 and output.changed != ():
                    self._links.on_air(SWAP_OUT, self._last_sent_s)  # a face the pipeline changed
                self._report_link(self._last_sent_s)
            height, width = pending.image.shape[:2]
            self._monitor.record_frame(
                FrameRecord(
                    session_id=settings.session_id,
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
        sending = [e.bitrate for e in self._links.encoders() if e.subscribers]
        paths = [policy.worst_path() for policy in sending]
        queues = [queue for queue, _ in paths if queue is not None]
        losses = [loss for _, loss in paths if loss is not None]
        self._monitor.session_link(
            self._settings.session_id,
            LinkState(
                send_bps=sum(policy.current_bps for policy in sending),
                queue_s=max(queues, default=None),
                loss=max(losses, default=None),
            ),
        )


def _to_rgb(reformatter: VideoReformatter, frame: av.VideoFrame) -> np.ndarray:
    """The frame as RGB through the session's converter (its context is kept while the size holds)."""
    return reformatter.reformat(frame, format="rgb24").to_ndarray()


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


@dataclass(frozen=True)
class _Disclosure:
    """What the encode hop writes on the frame before the encoders: the label, then the mark.
    `base_done`: the frame it may reuse (a repeat's) has both already."""

    marker: FrameMarker | None
    label: str | None
    base_done: bool

    @property
    def active(self) -> bool:
        return self.marker is not None or self.label is not None


def _encode(
    encoders: Sequence[FanoutEncoder],
    image: np.ndarray,
    base: av.VideoFrame | None,
    changed: tuple[Box, ...] | None,
    pts: int,
    made: tuple[np.ndarray | None, ...] | None = None,
    disclosure: _Disclosure | None = None,
) -> tuple[av.VideoFrame | None, list[list[av.Packet]], float]:
    """One worker-thread hop per frame: the YUV frame once (reused, patched or converted whole), the label and
    the mark on it (their cost returned, ms), then every codec's encode of it. `made`: the changed boxes'
    I420 planes when the pipeline's device made them."""
    if not encoders:
        return None, [], 0.0
    h, w = image.shape[:2]
    yuv: av.VideoFrame | None = None
    if base is not None and changed is not None and (base.height, base.width) == (h, w) and is_i420(base):
        yuv = patched_frame(base, image, changed, made)
    else:
        i420 = rgb_to_i420(image)  # None for odd sizes: each encoder converts from RGB itself
        yuv = av.VideoFrame.from_ndarray(i420, format="yuv420p") if i420 is not None else None
    t0 = time.perf_counter()
    if disclosure is not None and disclosure.active and not (yuv is base and disclosure.base_done):
        keyframe = any(e.keyframe_due for e in encoders)
        yuv, image = _disclose(disclosure, yuv, image, owned=yuv is not base, keyframe=keyframe)
    mark_ms = (time.perf_counter() - t0) * 1000.0
    return yuv, [e.encode(image, pts, yuv) for e in encoders], mark_ms


def _disclose(
    disclosure: _Disclosure, yuv: av.VideoFrame | None, image: np.ndarray, owned: bool, keyframe: bool = False
) -> tuple[av.VideoFrame | None, np.ndarray]:
    """The label and the mark on the I420 frame (a copy where it is not this hop's own), or on the RGB picture
    where there is no I420 frame (odd sizes). `keyframe`: an encoder will start again on this frame."""
    if yuv is None:
        if disclosure.label is not None:
            image = draw_label(image.copy(), disclosure.label)
        if disclosure.marker is not None:
            image = disclosure.marker.mark_rgb(image)
        return None, image
    if not owned:
        yuv = copied(yuv)
    if disclosure.label is not None:
        draw_label_i420(yuv, disclosure.label)
    if disclosure.marker is not None:
        yuv = disclosure.marker.mark(yuv, owned=True, keyframe=keyframe)
    return yuv, image
