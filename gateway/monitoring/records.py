"""What the media path reports to the monitor: one `FrameRecord` per frame, whatever its fate, and about once
a second each session's `LinkState`.

The gateway builds these; `Monitor.record_frame` consumes them. Pure data, no behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Outcome(StrEnum):
    PROCESSED = "processed"
    DROPPED_STALE = "stale"  # replaced by a newer frame of the same session before it was processed
    DROPPED_DEADLINE = "deadline"  # could not finish within the budget, not processed
    ERROR = "error"  # the engine failed for this frame's batch


@dataclass(frozen=True)
class FrameRecord:
    session_id: str
    frame_id: int
    arrival_s: float  # time.monotonic() when the decoded frame reached the gateway
    outcome: Outcome
    server_ms: float = 0.0  # arrival → processed frame handed to the encoder
    # Stage timings in ms: "decode", "queue_wait", "encode" plus the pipeline stages (engines.frames).
    stages_ms: dict[str, float] = field(default_factory=dict)
    batch_sizes: dict[str, int] = field(default_factory=dict)
    faces: int = 0
    width: int = 0
    height: int = 0


@dataclass(frozen=True)
class LinkState:
    """A session's processed stream on the network (gateway.webrtc.congestion.bitrate): what its encoders are
    set to send and the worst path among its receivers (the one every receiver's rate follows)."""

    send_bps: int
    queue_s: float | None = None  # the largest queueing delay a receiver's round trips show
    loss: float | None = None  # the largest fraction lost in a receiver's latest report
