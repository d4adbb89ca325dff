"""The encoded-packet track both relays hand to aiortc's senders (video fan-out, Opus relay).

aiortc's `RTCRtpSender` only packetizes an `av.Packet` its track yields, so a relay needs a track whose
`recv()` waits on a small queue that the relay fills on the event loop. What to do when the queue is full
differs by medium (video waits for a keyframe, audio drops the oldest packet): each subclass's `offer`.
"""

from __future__ import annotations

import asyncio

import av
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError


class QueuedPacketTrack(MediaStreamTrack):
    """`recv()` yields queued packets; `stop()` ends it and detaches it from its source once."""

    def __init__(self, max_queue: int) -> None:
        super().__init__()
        self._queue: asyncio.Queue[av.Packet | None] = asyncio.Queue()
        self._max_queue = max_queue
        self.sent = 0
        self.dropped = 0

    async def recv(self) -> av.Packet:  # type: ignore[override]
        if self.readyState != "live":
            raise MediaStreamError
        packet = await self._queue.get()
        if packet is None:
            raise MediaStreamError
        self.sent += 1
        return packet

    def stop(self) -> None:
        if self.readyState == "live":
            self._queue.put_nowait(None)
        super().stop()
        self._detach()

    def _detach(self) -> None:
        """Unsubscribe from the source that offers packets (idempotent there)."""
        raise NotImplementedError
