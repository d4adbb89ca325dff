"""Adaptive degradation: a small pure state machine fed the rolling stats once per sample.

Levels: 0 full quality, 1 enhancer off, 2 + detect every 2nd frame, 3 + lower detector resolution,
4 + refuse new sessions. One step down after `step_down_after_s` of p95 above `step_down_fraction` of the
budget, frames shed above `drop_high_fraction` or VRAM above `vram_high_fraction`; one step up only after
`step_up_after_s` of headroom. Shed frames matter most: deadlines keep processed frames in budget, so
overload shows as shedding. Both timers restart after a step (each step needs its own evidence); with no
frames only VRAM can step it down. `recommend_max_batch` is the batch-size advice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from engines.frames import STAGE_ENHANCE, FrameOptions

LEVEL_NAMES: tuple[str, ...] = (
    "full",
    "enhancer_off",
    "detect_every_2nd",
    "low_detect_resolution",
    "refuse_new_sessions",
)
MAX_LEVEL = len(LEVEL_NAMES) - 1


@dataclass(frozen=True)
class DegradationConfig:
    enabled: bool = True
    step_down_after_s: float = 3.0
    step_up_after_s: float = 10.0
    # The budget is end to end; the server's share must leave room for the network and the client's codecs.
    step_down_fraction: float = 0.8  # step down when server p95 > this x budget...
    headroom_fraction: float = 0.6  # step up only while p95 < this x budget
    drop_high_fraction: float = 0.10  # step down when more than this share of frames is shed...
    drop_low_fraction: float = 0.02  # ...and count it as headroom only below this
    vram_high_fraction: float = 0.9
    max_level: int = MAX_LEVEL
    reduced_detect_size: int = 192
    p95_window_s: float = 3.0  # the server-time window the controller looks at (recent, not 30 s)
    min_frames: int = 5  # fewer frames than this in the window = no latency evidence


@dataclass(frozen=True)
class ControllerInput:
    now: float
    server_p95_ms: float | None  # None when the window holds too few frames
    vram_fraction: float | None  # None without a GPU
    budget_ms: float
    drop_fraction: float | None = None  # frames dropped (stale, deadline) / frames in, same window


@dataclass(frozen=True)
class Decision:
    level: int
    previous: int
    reason: str = ""

    @property
    def changed(self) -> bool:
        return self.level != self.previous


class DegradationController:
    def __init__(self, config: DegradationConfig) -> None:
        self.config = config
        self.level = 0
        self._over_since: float | None = None
        self._headroom_since: float | None = None
        self.steps = 0

    def update(self, inp: ControllerInput) -> Decision:
        cfg = self.config
        prev = self.level
        if not cfg.enabled:
            self.level = 0
            self._over_since = self._headroom_since = None
            return Decision(0, prev, "disabled" if prev else "")
        latency_over = (
            inp.server_p95_ms is not None and inp.server_p95_ms > cfg.step_down_fraction * inp.budget_ms
        )
        drops_over = inp.drop_fraction is not None and inp.drop_fraction > cfg.drop_high_fraction
        vram_over = inp.vram_fraction is not None and inp.vram_fraction > cfg.vram_high_fraction
        latency_ok = inp.server_p95_ms is None or inp.server_p95_ms < cfg.headroom_fraction * inp.budget_ms
        drops_ok = inp.drop_fraction is None or inp.drop_fraction < cfg.drop_low_fraction
        vram_ok = inp.vram_fraction is None or inp.vram_fraction <= cfg.vram_high_fraction

        if latency_over or drops_over or vram_over:
            self._headroom_since = None
            if self._over_since is None:
                self._over_since = inp.now
            if inp.now - self._over_since >= cfg.step_down_after_s and self.level < cfg.max_level:
                self.level += 1
                self.steps += 1
                self._over_since = inp.now
                why = []
                if latency_over:
                    limit = cfg.step_down_fraction * inp.budget_ms
                    why.append(
                        f"server p95 {inp.server_p95_ms:.0f} ms > {limit:.0f} ms "
                        f"({100 * cfg.step_down_fraction:.0f}% of the {inp.budget_ms:.0f} ms budget)"
                    )
                if drops_over and inp.drop_fraction is not None:
                    why.append(
                        f"{100 * inp.drop_fraction:.0f}% of frames dropped "
                        f"> {100 * cfg.drop_high_fraction:.0f}%"
                    )
                if vram_over and inp.vram_fraction is not None:
                    why.append(f"VRAM {100 * inp.vram_fraction:.0f}% > {100 * cfg.vram_high_fraction:.0f}%")
                return Decision(self.level, prev, "; ".join(why) + f" for {cfg.step_down_after_s:g} s")
            return Decision(self.level, prev)

        self._over_since = None
        if latency_ok and drops_ok and vram_ok and self.level > 0:
            if self._headroom_since is None:
                self._headroom_since = inp.now
            if inp.now - self._headroom_since >= cfg.step_up_after_s:
                self.level -= 1
                self.steps += 1
                self._headroom_since = inp.now
                p95 = "no frames" if inp.server_p95_ms is None else f"server p95 {inp.server_p95_ms:.0f} ms"
                return Decision(
                    self.level,
                    prev,
                    f"headroom ({p95} < {100 * cfg.headroom_fraction:.0f}% of "
                    f"budget) for {cfg.step_up_after_s:g} s",
                )
        else:
            self._headroom_since = None  # between the two thresholds: hold
        return Decision(self.level, prev)


def options_for_level(level: int, requested: tuple[str, ...], config: DegradationConfig) -> FrameOptions:
    """The per-frame knobs a session gets at `level` (its requested processors, minus what the level
    sheds)."""
    processors = tuple(p for p in requested if not (level >= 1 and p == STAGE_ENHANCE))
    return FrameOptions(
        processors=processors,
        detect_every=2 if level >= 2 else 1,
        detect_size=config.reduced_detect_size if level >= 3 else None,
    )


def admits_new_sessions(level: int) -> bool:
    return level < 4


def recommend_max_batch(
    points: Sequence[tuple[int, float]],
    budget_ms: float,
    *,
    stage_share: float = 0.5,
    cap: int = 32,
    default: int = 8,
) -> int:
    """Largest batch whose predicted stage time fits in `stage_share` of the budget.

    `points` are observed (batch size, stage ms for that batch). A least-squares line t(b) = a + c*b
    separates the
    fixed cost per launch (a) from the per-item cost (c); with one distinct batch size the cost is taken as
    proportional (a = 0). Too little data -> `default`.
    """
    pts = [(b, t) for b, t in points if b > 0 and t >= 0 and math.isfinite(t)]
    if len(pts) < 3:
        return default
    sizes = {b for b, _ in pts}
    limit = stage_share * budget_ms
    if len(sizes) == 1:
        b0 = next(iter(sizes))
        per_item = sum(t for _, t in pts) / len(pts) / b0
        a, c = 0.0, per_item
    else:
        n = len(pts)
        mb = sum(b for b, _ in pts) / n
        mt = sum(t for _, t in pts) / n
        var = sum((b - mb) ** 2 for b, _ in pts)
        c = sum((b - mb) * (t - mt) for b, t in pts) / var
        a = mt - c * mb
        if c <= 0:  # bigger batches were not slower (noise or a GPU far from saturation): allow the cap
            return cap if a <= limit else 1
    if c <= 0:
        return cap
    best = int((limit - max(a, 0.0)) // c)
    return max(1, min(cap, best))
