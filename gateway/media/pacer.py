"""When each packet of the processed stream may leave: a pacer, as every WebRTC sender has. Pure.

Why (issue 13, item 8): aiortc sends a frame's packets back to back. A keyframe, or any frame larger than
usual, reaches a bottleneck as one burst, and a shallow queue there drops its tail: NACKs, retransmissions
and a frozen picture follow. libwebrtc's pacer sends at 2.5x the encoder's target and lets a short burst
(40 ms of that rate) go at once (modules/pacing: kDefaultPaceMultiplier, the burst interval). A frame that
fits the burst leaves as before; a larger one is spread, so the bottleneck drains while it arrives and its
queue peaks lower.

`PacingBudget.depart(now, nbytes, rate_bps)` reserves a packet's slot and returns when it may leave: no
later than its turn at the pacing rate, and at once while the reserved backlog is within the burst. Slots
are reserved in call order, so concurrent senders (a frame and its retransmissions) keep their order.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PacingConfig:
    factor: float = 2.5  # pacing rate = factor x the encoder's target bitrate
    burst_s: float = 0.040  # backlog (at the pacing rate) that may leave at once
    min_rate_bps: float = 300_000.0  # never pace slower than this (a target near the floor is no link rate)

    def __post_init__(self) -> None:
        if self.factor < 1.0 or self.burst_s < 0 or self.min_rate_bps <= 0:
            raise ValueError("pacing needs factor >= 1, burst_s >= 0 and min_rate_bps > 0")


@dataclass
class PacingBudget:
    config: PacingConfig = PacingConfig()
    _clear_at: float = 0.0  # when everything reserved so far has left at the pacing rate
    paced: int = 0  # packets held back
    held_s: float = 0.0  # their total wait

    def depart(self, now: float, nbytes: int, rate_bps: float) -> float:
        rate = max(self.config.factor * rate_bps, self.config.min_rate_bps)
        self._clear_at = max(self._clear_at, now)
        at = max(now, self._clear_at - self.config.burst_s)
        self._clear_at += nbytes * 8.0 / rate
        if at > now:
            self.paced += 1
            self.held_s += at - now
        return at
