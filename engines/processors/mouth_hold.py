"""The face-shape warp held still over the mouth: the smile's opening moves as one piece.

Why: the face shape moves the target's pixels by a thin-plate spline on a coarse `face_shape.GRID` node
grid. The mesh's inner lips all take one offset (`face_expression.split`, `expression.INNER_HOLD`), so the
opening should only move, yet the nodes around the mouth also carry the outer lips' and cheeks' offsets,
and stretched to every pixel they bend the teeth. Here the pixel map over the opening and the kept mouth is
the inner lips' mean shift: the inner lips moved `HOLD_REACH` of the way to the outer lips (past the kept
mouth's inner-lip ring), grown by `HOLD_GROW` of the face, feathered by `HOLD_FEATHER` out over the lips
and the skin beside them (the source's paste covers them). The weight is drawn in the mouth's box only.
`plan_hold` / `hold_map` are the host path (numpy/OpenCV), `device_weight` / `hold_offsets` their torch
twin for `device_mesh_warp` (tests/unit/engines/processors/test_mouth_hold.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from engines.processors.face_shape import WarpPlan, face_size, pixel_map
from engines.processors.masks import INNER_LIPS, OUTER_LIPS

HOLD_REACH = 0.15  # the held region starts from the inner lips moved this far toward the outer lips...
HOLD_GROW = 0.035  # ...grown by this fraction of the face size (the kept mouth's grow plus two feathers)...
HOLD_FEATHER = 0.01  # ...and feathered by this much, out over the lips


@dataclass(frozen=True)
class MouthHold:
    """Where one face's warp is held: `weight` (float32, 1 = held) over `box` (x0, y0, x1, y1, in the warp
    window's coordinates); a held pixel samples the frame at itself + `shift` (frame px)."""

    box: tuple[int, int, int, int]
    weight: np.ndarray
    shift: np.ndarray


@dataclass(frozen=True)
class HoldShape:
    """The held region before it is drawn: its ring (n, 2, box coordinates), the grow (px) and the
    feather's sigma (px), the box in the window and the shift."""

    ring: np.ndarray
    grow: int
    sigma: float
    box: tuple[int, int, int, int]
    shift: np.ndarray


def inner_shift(target: np.ndarray, moved: np.ndarray) -> np.ndarray:
    """The inner lips' mean shift (2,) float64: where a pixel of the new mesh's opening samples the target,
    relative to itself (the target's inner lips minus the new mesh's, averaged)."""
    inner = list(INNER_LIPS)
    return np.asarray((target[inner].astype(np.float64) - moved[inner].astype(np.float64)).mean(0))


def hold_ring(local: np.ndarray) -> np.ndarray:
    """The held region's ring (20, 2): the inner lips moved `HOLD_REACH` of the way to the outer lips."""
    pts = np.asarray(local, dtype=np.float64)
    inner, outer = pts[list(INNER_LIPS)], pts[list(OUTER_LIPS)]
    return np.asarray(inner + HOLD_REACH * (outer - inner))


def hold_shape(plan: WarpPlan, target: np.ndarray) -> HoldShape | None:
    """The held region of `plan`'s window for the target's mesh `target` (468, 2, frame coordinates);
    None when the mouth lies outside the window."""
    x0, y0, x1, y1 = plan.window
    h, w = y1 - y0, x1 - x0
    local = plan.landmarks.astype(np.float64) - (x0, y0)
    size = face_size(local)
    ring = hold_ring(local)
    grow = int(round(size * HOLD_GROW))
    sigma = max(0.5, size * HOLD_FEATHER)
    pad = grow + int(np.ceil(3.0 * sigma)) + 1
    lo, hi = np.floor(ring.min(0)).astype(int) - pad, np.ceil(ring.max(0)).astype(int) + pad + 1
    bx0, by0 = max(int(lo[0]), 0), max(int(lo[1]), 0)
    bx1, by1 = min(int(hi[0]), w), min(int(hi[1]), h)
    if bx1 <= bx0 or by1 <= by0:
        return None
    shift = inner_shift(target, plan.landmarks)
    return HoldShape(ring - (bx0, by0), grow, sigma, (bx0, by0, bx1, by1), shift)


def ring_fill(h: int, w: int, ring: np.ndarray) -> np.ndarray:
    """(h, w) uint8, 255 at the pixel centres inside `ring` (n, 2) by crossing parity: the rule of
    `tensor_ops.polygons_mask`, so the host and the device draw the same pixels (cv2.fillPoly also fills
    the pixels its outline touches)."""
    a, b = np.asarray(ring, dtype=np.float64), np.roll(np.asarray(ring, dtype=np.float64), -1, 0)
    crossing = a[:, 1] != b[:, 1]
    a, b = a[crossing], b[crossing]
    ys = np.arange(h, dtype=np.float64)[None, :]
    spans = (ys >= np.minimum(a[:, 1:], b[:, 1:])) & (ys < np.maximum(a[:, 1:], b[:, 1:]))  # (E, h)
    x_at = a[:, :1] + (ys - a[:, 1:]) * ((b[:, :1] - a[:, :1]) / (b[:, 1:] - a[:, 1:]))
    # each crossing flips the pixels at x <= x_at of its row: +1 from x = 0, -1 past floor(x_at), summed
    edge, row = np.nonzero(spans)
    end = np.clip(np.floor(x_at[edge, row]) + 1, 0, w).astype(np.int64)
    flips = np.bincount(row * (w + 1), minlength=h * (w + 1)) - np.bincount(
        row * (w + 1) + end, minlength=h * (w + 1)
    )
    counts = np.cumsum(flips.reshape(h, w + 1)[:, :w], axis=1)
    return np.asarray((counts & 1) * 255, dtype=np.uint8)


def plan_hold(plan: WarpPlan, target: np.ndarray) -> MouthHold | None:
    """The held region's weight, drawn on the host: the ring filled, grown and blurred in its box."""
    shape = hold_shape(plan, target)
    if shape is None:
        return None
    bx0, by0, bx1, by1 = shape.box
    filled = ring_fill(by1 - by0, bx1 - bx0, shape.ring)
    if shape.grow > 0:
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * shape.grow + 1,) * 2)
        filled = np.asarray(cv2.dilate(filled, kernel), np.uint8)
    weight = cv2.GaussianBlur(filled.astype(np.float32) * np.float32(1.0 / 255.0), (0, 0), shape.sigma)
    return MouthHold(shape.box, np.asarray(weight, np.float32), shape.shift.astype(np.float32))


def hold_map(pixels: np.ndarray, hold: MouthHold, origin: tuple[int, int]) -> None:
    """`pixels` ((h, w, 2) float32, frame coordinates: `face_shape.pixel_map`) held in place: each pixel
    of the box moved `weight` of the way to sampling itself + shift. `origin`: the window's frame (x, y)."""
    bx0, by0, bx1, by1 = hold.box
    box = pixels[by0:by1, bx0:bx1]
    xs = np.arange(bx0, bx1, dtype=np.float32) + np.float32(origin[0] + hold.shift[0])
    ys = np.arange(by0, by1, dtype=np.float32) + np.float32(origin[1] + hold.shift[1])
    box[..., 0] += hold.weight * (xs[None, :] - box[..., 0])
    box[..., 1] += hold.weight * (ys[:, None] - box[..., 1])


def held_pixel_map(plan: WarpPlan, target: np.ndarray) -> np.ndarray:
    """`face_shape.pixel_map` of the plan with the mouth held (the map the swap moves the target by)."""
    pixels = pixel_map(plan)
    hold = plan_hold(plan, target)
    if hold is not None:
        hold_map(pixels, hold, plan.window[:2])
    return pixels


def held_remap(frame: np.ndarray, plan: WarpPlan, target: np.ndarray) -> np.ndarray:
    """The plan's window of `frame` moved to the source's face shape, the mouth held (`held_pixel_map`)."""
    pixels = held_pixel_map(plan, target)
    return np.asarray(cv2.remap(frame, pixels, None, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE))


# -- the torch twin ----------------------------------------------------------------------------------------


def device_weight(shape: HoldShape, device: Any) -> Any:
    """`plan_hold`'s weight drawn on a torch device: (bh, bw) float32."""
    from engines.processors import tensor_ops as T

    bx0, by0, bx1, by1 = shape.box
    filled = T.polygons_mask(by1 - by0, bx1 - bx0, [shape.ring], device).float()[None, None]
    if shape.grow > 0:
        filled = T.dilate(filled, shape.grow)
    return T.gaussian_blur(filled, shape.sigma)[0, 0]


def hold_offsets(offsets: Any, shape: HoldShape, weight: Any) -> None:
    """`hold_map` on the device: `offsets` ((2, h, w) float, each pixel's offset to the frame pixel it
    samples) moved `weight` of the way to the shift over the held box, in place."""
    bx0, by0, bx1, by1 = shape.box
    box = offsets[:, by0:by1, bx0:bx1]
    for c in range(2):
        box[c] += weight * (float(shape.shift[c]) - box[c])
