"""Release a received video frame as soon as its RTP marker packet completes it.

Why: stock aiortc's `JitterBuffer` only emits a frame when the first packet of the NEXT frame arrives (it
detects "frame complete" by seeing a new RTP timestamp). That adds one frame interval per receiving hop
(+67 ms at 15 fps; measured echo RTT 147 ms -> 12 ms without it). RTP video senders set the marker bit on the
last packet of each frame (RFC 3550 / RFC 7741), so a contiguous run of packets from the buffer's origin that
share one timestamp and ends in a marker packet is a whole frame and can go to the decoder right away.

How: `MarkerJitterBuffer` subclasses aiortc's `JitterBuffer` and keeps its loss/reorder handling; it only adds
the marker release. `apply_low_latency_receive(pc)` installs it on ONE peer connection: on the video receivers
that exist now, and (through an instance-level wrapper of the connection's private transceiver factory) on the
ones it creates later. No global monkeypatch: other peer connections in the process keep stock behaviour.

Version guard: the receiver keeps its buffer in the name-mangled attribute
`_RTCRtpReceiver__jitter_buffer` and the connection creates transceivers in
`_RTCPeerConnection__createTransceiver`; both were checked against aiortc 1.14-1.16.
On another aiortc version whose internals differ, nothing is changed and a warning is logged (the
connection still works, with stock latency); `apply_low_latency_receive` returns False in that case.

The buffer also remembers when each frame was completed (`time.monotonic()`), keyed like the `pts` aiortc
gives the decoded frame, so the gateway can time decode + hand-off (`frame_completed_at`).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any

import aiortc
from aiortc import RTCPeerConnection, RTCRtpReceiver
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtpPacket

logger = logging.getLogger(__name__)

_RECEIVER_BUFFER_ATTR = "_RTCRtpReceiver__jitter_buffer"
_PC_FACTORY_ATTR = "_RTCPeerConnection__createTransceiver"
_PC_MARK = "_livefuse_low_latency"
TESTED_AIORTC = ((1, 14), (1, 16))
_COMPLETION_HISTORY = 128


def _aiortc_version() -> tuple[int, int]:
    parts = str(getattr(aiortc, "__version__", "0.0")).split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return 0, 0


class MarkerJitterBuffer(JitterBuffer):
    """aiortc's video jitter buffer plus release-on-marker (see the module docstring).

    If the stock logic and the marker logic would both produce a frame on the same packet (only possible when
    a sender omits the marker bit on the previous frame), the stock one is returned and the marker frame
    follows on the next packet, as it would have with stock aiortc.
    """

    def __init__(self, capacity: int = 512, is_video: bool = True) -> None:
        super().__init__(capacity=capacity, prefetch=0, is_video=is_video)
        self._first_timestamp: int | None = None
        self._completed: OrderedDict[int, float] = OrderedDict()

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        pli_flag, frame = super().add(packet)
        if frame is None:
            frame = self._release_complete()
        if frame is not None:
            self._note_completed(frame.timestamp)
        return pli_flag, frame

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
                data = b"".join(p._data for p in packets)  # type: ignore[attr-defined]
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
    current = getattr(receiver, _RECEIVER_BUFFER_ATTR, None)
    if isinstance(current, MarkerJitterBuffer):
        return True
    if not isinstance(current, JitterBuffer) or getattr(current, "_origin", 0) is not None:
        return False  # unknown internals, or packets already buffered: leave it alone
    if not getattr(current, "_is_video", False):
        return False
    setattr(receiver, _RECEIVER_BUFFER_ATTR, MarkerJitterBuffer(capacity=current.capacity))
    return True


def apply_low_latency_receive(pc: RTCPeerConnection) -> bool:
    """Make every video receiver of `pc` (present and future) release frames on their marker packet.

    Call right after creating the connection (before `addTransceiver`/`setRemoteDescription`), or at any point
    before media flows. Idempotent. Returns False (and changes nothing) on an untested aiortc version.
    """
    version = _aiortc_version()
    if not (TESTED_AIORTC[0] <= version <= TESTED_AIORTC[1]) or not hasattr(pc, _PC_FACTORY_ATTR):
        logger.warning("aiortc %s.%s untested for marker release; keeping stock jitter buffer", *version)
        return False
    for transceiver in pc.getTransceivers():
        if transceiver.kind == "video":
            _install_on_receiver(transceiver.receiver)
    if getattr(pc, _PC_MARK, False):
        return True
    original = getattr(pc, _PC_FACTORY_ATTR)

    def create_transceiver(*args: Any, **kwargs: Any) -> Any:
        transceiver = original(*args, **kwargs)
        if transceiver.kind == "video":
            _install_on_receiver(transceiver.receiver)
        return transceiver

    setattr(pc, _PC_FACTORY_ATTR, create_transceiver)
    setattr(pc, _PC_MARK, True)
    return True


def frame_completed_at(receiver: RTCRtpReceiver, pts: int | None) -> float | None:
    """Completion time of the encoded frame behind a decoded frame (None if unknown or stock buffer)."""
    buffer = getattr(receiver, _RECEIVER_BUFFER_ATTR, None)
    if pts is None or not isinstance(buffer, MarkerJitterBuffer):
        return None
    return buffer.completed_at(pts)
