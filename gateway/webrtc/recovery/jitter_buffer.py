"""Release a received video frame as soon as its RTP marker packet completes it, and repair loss.

aiortc's `JitterBuffer` emits a frame only when the first packet of the next one arrives: one frame interval
per receiving hop. `MarkerJitterBuffer` subclasses it, keeps its reorder handling, releases a contiguous run
of one timestamp that ends in a marker packet, and acts on `policy.LossRecovery`. `apply_low_latency_receive`
installs it on one connection's video receivers, present and future (no global patch). It also remembers
when each frame completed (`frame_completed_at`) and, through `measure_transit`, feeds each frame's first
packet's transit to the uplink's `OneWayDelay`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from aiortc import RTCPeerConnection, RTCRtpReceiver
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtpPacket

from gateway.webrtc import chain, compat
from gateway.webrtc.congestion.queue_delay import AbsSendClock, OneWayDelay
from gateway.webrtc.recovery.policy import LossRecovery, RecoveryConfig, is_keyframe

logger = logging.getLogger(__name__)

_PC_MARK = "_livefuse_low_latency"
LAYER = "loss recovery NACK filter"
_COMPLETION_HISTORY = 128
_VIDEO_CLOCK_HZ = 90_000  # RTP clock of every video payload (RFC 7741 VP8, RFC 6184 H.264)


class MarkerJitterBuffer(JitterBuffer):
    """aiortc's video jitter buffer plus release-on-marker (see the module docstring).

    If the stock logic and the marker logic would both produce a frame on the same packet (only possible when
    a sender omits the marker bit on the previous frame), the stock one is returned and the marker frame
    follows on the next packet, as it would have with stock aiortc.
    """

    def __init__(
        self, capacity: int = 512, is_video: bool = True, recovery: RecoveryConfig | None = None
    ) -> None:
        super().__init__(capacity=capacity, prefetch=0, is_video=is_video)
        self._first_timestamp: int | None = None
        self._completed: OrderedDict[int, float] = OrderedDict()
        self.recovery = LossRecovery(recovery or RecoveryConfig())
        # Set by `_install_on_receiver`: NACK again (ssrc, sequence numbers); None = no repeats.
        self.send_nack: Callable[[int, list[int]], None] | None = None
        # Set by gateway.webrtc.congestion.uplink_feedback: sees every packet first (loss counting); None =
        # nobody.
        self.packet_observer: Callable[[RtpPacket], None] | None = None
        # Set by `measure_transit`: each frame's first packet's transit; None = not measured.
        self.transit: OneWayDelay | None = None
        self._transit_timestamp: int | None = None
        self._abs_send = AbsSendClock()

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        if self.packet_observer is not None:
            self.packet_observer(packet)
        now = time.monotonic()
        if self.transit is not None and packet.timestamp != self._transit_timestamp:
            self._transit_timestamp = packet.timestamp
            abs_send = packet.extensions.abs_send_time
            sent = (
                packet.timestamp / _VIDEO_CLOCK_HZ if abs_send is None else self._abs_send.seconds(abs_send)
            )
            self.transit.add(sent, now)
        recovery = self.recovery
        recovery.on_packet(packet.sequence_number, now)
        pli_flag, frame = super().add(packet)
        if pli_flag:  # aiortc's buffer overflowed or the stream jumped: references are gone
            recovery.need_keyframe(now)
        if frame is None:
            frame = self._release_complete()
        if frame is None:
            gap = self._head_gap()
            if gap is not None and recovery.should_skip((self._origin + gap) & 0xFFFF, now):  # type: ignore[operator]
                frame = self._jump_ahead(gap, now)
        elif self._backlog() > recovery.config.max_backlog_frames:
            frame = self._jump_ahead(0, now, keyframe_only=True) or frame
        if self._origin is not None:
            recovery.forget_before(self._origin)
        if self.send_nack is not None:
            due = recovery.nacks_due(now)
            if due:
                self.send_nack(packet.ssrc, due)
        if frame is not None and not recovery.started:  # the first frame: a keyframe, or one asked for now
            recovery.start(is_keyframe(frame.data), now)
        # Its type matters only while a keyframe is awaited (release() is True otherwise): no scan per frame.
        if frame is not None and recovery.awaiting_keyframe:
            if not recovery.release(is_keyframe(frame.data), now):
                frame = None
        if frame is not None:
            self._note_completed(frame.timestamp)
        return recovery.pli_due(now), frame

    def _slot(self, count: int) -> RtpPacket | None:
        return self._packets[(self._origin + count) % self.capacity]  # type: ignore[operator]

    def _head_gap(self) -> int | None:
        """Offset of the first missing packet from the origin that newer packets stand behind, else None.
        Cheap when nothing is missing (the common case): no scan at all."""
        highest = self.recovery.highest
        if self._origin is None or highest is None or not self.recovery.has_missing:
            return None
        span = min((highest - self._origin) & 0xFFFF, self.capacity - 1)
        for count in range(span):
            if self._slot(count) is None:
                return count
        return None

    def _backlog(self) -> int:
        """Complete frames waiting from the origin (contiguous packets ending in a marker)."""
        if self._origin is None:
            return 0
        frames = 0
        for count in range(self.capacity):
            packet = self._slot(count)
            if packet is None:
                break
            frames += packet.marker
        return frames

    def _jump_ahead(self, after: int, now: float, keyframe_only: bool = False) -> JitterFrame | None:
        """Drop everything before the newest keyframe start past offset `after`, else (unless `keyframe_only`)
        before the newest frame start (a packet after a marker packet); tell the recovery which. Returns a
        frame now complete."""
        starts: list[tuple[int, bool]] = []
        previous = self._slot(after)
        for count in range(after + 1, self.capacity):
            packet = self._slot(count)
            if packet is not None and previous is not None and previous.marker:
                starts.append((count, is_keyframe(compat.packet_payload(packet))))
            previous = packet
        if not starts:
            return None
        keyframes = [count for count, key in starts if key]
        if keyframe_only and not keyframes:
            return None
        self.remove(keyframes[-1] if keyframes else starts[-1][0])
        self.recovery.skipped(now, at_keyframe=bool(keyframes))
        return self._release_complete()

    def _release_complete(self) -> JitterFrame | None:
        """Emit the oldest frame if its packets are all present: same timestamp from the origin to a marker.

        Checked on every packet (not only on the marker) so a frame whose marker arrived before a reordered or
        retransmitted middle packet is released when that packet fills the gap.
        """
        origin = self._origin
        if origin is None:
            return None
        packets: list[RtpPacket] = []
        for count in range(self.capacity):
            packet = self._packets[(origin + count) % self.capacity]
            if packet is None or (packets and packet.timestamp != packets[0].timestamp):
                return None
            packets.append(packet)
            if packet.marker:
                self.remove(count + 1)
                data = b"".join(compat.packet_payload(p) for p in packets)
                return JitterFrame(data=data, timestamp=packet.timestamp)
        return None

    def _note_completed(self, timestamp: int) -> None:
        if self._first_timestamp is None:
            self._first_timestamp = timestamp
        key = (timestamp - self._first_timestamp) & 0xFFFFFFFF
        self._completed[key] = time.monotonic()
        while len(self._completed) > _COMPLETION_HISTORY:
            self._completed.popitem(last=False)

    def completed_at(self, pts: int) -> float | None:
        """When the encoded frame whose decoded `pts` (aiortc's mapped RTP timestamp) is `pts` completed."""
        return self._completed.get(pts & 0xFFFFFFFF)


def _install_on_receiver(receiver: RTCRtpReceiver) -> bool:
    current = compat.jitter_buffer(receiver)
    if isinstance(current, MarkerJitterBuffer):
        return True
    if not isinstance(current, JitterBuffer) or not compat.jitter_buffer_unused(current):
        return False  # unknown internals, or packets already buffered: leave it alone
    if not compat.jitter_is_video(current):
        return False
    buffer = MarkerJitterBuffer(capacity=current.capacity)
    if hasattr(receiver, compat.RECEIVER_SEND_RTCP_NACK):

        def make(send_nack: Callable[[int, list[int]], Any]) -> Callable[[int, list[int]], Any]:
            buffer.send_nack = _nack_sender(send_nack)

            async def filtered_nack(ssrc: int, lost: list[int]) -> None:
                wanted = buffer.recovery.filter_nack(lost, compat.jitter_origin(buffer))
                if wanted:
                    await send_nack(ssrc, wanted)

            return filtered_nack

        chain.wrap(receiver, compat.RECEIVER_SEND_RTCP_NACK, LAYER, make)  # this receiver only
    compat.set_jitter_buffer(receiver, buffer)
    return True


def _nack_sender(send: Callable[[int, list[int]], Any]) -> Callable[[int, list[int]], None]:
    """The buffer runs inside aiortc's (async) packet handler but is synchronous: send the NACK as a task."""
    tasks: set[asyncio.Future[Any]] = set()

    def nack(ssrc: int, seqs: list[int]) -> None:
        task = asyncio.ensure_future(send(ssrc, seqs))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    return nack


def apply_low_latency_receive(pc: RTCPeerConnection) -> bool:
    """Make every video receiver of `pc` (present and future) release frames on their marker packet.

    Call right after creating the connection (before `addTransceiver`/`setRemoteDescription`), or at any point
    before media flows. Idempotent. Returns False (and changes nothing) on an untested aiortc version.
    """
    if compat.refused("marker release"):
        return False
    return chain.on_transceivers(pc, _PC_MARK, _install_on_video)


def _install_on_video(transceiver: Any) -> None:
    if transceiver.kind == "video":
        _install_on_receiver(transceiver.receiver)


def measure_transit(receiver: RTCRtpReceiver, transit: OneWayDelay) -> bool:
    """Feed `transit` from this receiver's packets (False: stock buffer, nothing measured)."""
    buffer = compat.jitter_buffer(receiver)
    if not isinstance(buffer, MarkerJitterBuffer):
        return False
    buffer.transit = transit
    return True


def frame_completed_at(receiver: RTCRtpReceiver, pts: int | None) -> float | None:
    """Completion time of the encoded frame behind a decoded frame (None if unknown or stock buffer)."""
    buffer = compat.jitter_buffer(receiver)
    if pts is None or not isinstance(buffer, MarkerJitterBuffer):
        return None
    return buffer.completed_at(pts)


def recovery_counters(receiver: RTCRtpReceiver) -> dict[str, int] | None:
    """NACKs repeated, gaps skipped, keyframes asked for, frames held here (None: stock buffer)."""
    buffer = compat.jitter_buffer(receiver)
    if not isinstance(buffer, MarkerJitterBuffer):
        return None
    return dict(vars(buffer.recovery.counters))
