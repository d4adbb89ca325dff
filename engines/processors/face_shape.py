"""The source's face shape on the target, per frame: a mesh offset and the smooth warp that moves the target.

Why: mesh_warp paints the source's skin onto the target's geometry, so the outline, jaw, nose length and eye
spacing would stay the target's, and an embedder (or a viewer) sees much of the target in them. The source's
3-D mesh (engines.source.shape, read once) is fitted onto the target's tracked 2-D mesh by a scaled-
orthographic similarity; the difference is smoothed over the mesh's neighbour graph (more on the silhouette),
capped at `CAP_FRAC` of the face size, and the target's expression is put back (`restore_expression`, and
face_expression's split): each eye moves whole to the source's eye centre. The new mesh is target + alpha *
offset (alpha: the session's `shape`, 0..1); the target's pixels move to it by a thin-plate spline through
~44 mesh points and the grown window's fixed border, on a coarse `GRID` node grid (`spline_frame`: what
every window shares), stretched to one `cv2.remap`. Folds (a Jacobian under `MIN_DET`) scale alpha back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import cv2
import numpy as np

from engines.processors.alignment import extent
from engines.processors.face_expression import at_rest, split
from engines.processors.masks import EYE_LEFT, EYE_RIGHT, MOUTH_GAPS
from engines.source.shape import SourceShape, _axes

NOSE_TIP = 1  # FaceMesh's nose tip: the nearest point of a face seen from the front
CAP_FRAC = 0.06  # largest offset of a mesh point, as a fraction of the face size
SMOOTH_STEPS = 1  # neighbour-averaging passes over the offset inside the face (the nose's, lips' and eyes'
# own shape kept)...
OUTLINE_STEPS = 3  # ...and on the silhouette ring, fading out over its neighbours (SourceShape.outline), so
# the outline, where the paste meets the target's skin, moves smoothly...
SMOOTH_WEIGHT = 0.5  # ...each pass moving a point this far toward its neighbours' mean
WINDOW_GROW = 0.12  # the warped window: the face's extent grown by this fraction of its width / height
# per side (the gateway changes nothing past 15 %)
GRID = 16  # spline nodes per side of the warped window (stretched to a per-pixel map)
BORDER_NODES = 5  # fixed control points per window side (corners included)
REGULARISE = 1e-4  # spline smoothing (coordinates normalised to the window): near-coincident points
MIN_DET = 0.25  # smallest local area ratio of the map accepted (1 = no change, <= 0 = a fold)
BACKOFF = 0.6  # alpha is scaled by this after each refused fold...
ATTEMPTS = 4  # ...at most this many times, then the frame is not warped

EYE_CORNERS = ((33, 133), (362, 263))
EYE_RINGS = (EYE_RIGHT, EYE_LEFT)
EYE_RING_IDX = tuple(np.array(ring) for ring in EYE_RINGS)
UPPER_LIP = (415, 310, 311, 312, 13, 82, 81, 80, 191, 409, 270, 269, 267, 0, 37, 39, 40, 185)
LOWER_LIP = (95, 88, 178, 87, 14, 317, 402, 318, 324, 146, 91, 181, 84, 17, 314, 405, 321, 375)
# the same as index arrays (fancy indexing with a tuple converts it every call)
UPPER_LIP_IDX, LOWER_LIP_IDX = np.array(UPPER_LIP), np.array(LOWER_LIP)
MOUTH_UPPER, MOUTH_LOWER = np.array([u for u, _ in MOUTH_GAPS]), np.array([lo for _, lo in MOUTH_GAPS])
# Spline control points: every other point of the silhouette ring, brows, eye corners and lids, nose, lips,
# cheeks (with the window's border, under 100 points: the spline's solve stays one small system).
CONTROL = (
    10,
    297,
    284,
    389,
    454,
    361,
    397,
    379,
    400,
    152,
    176,
    150,
    172,
    132,
    234,
    162,
    54,
    67,
    70,
    107,
    336,
    300,
    33,
    133,
    159,
    145,
    362,
    263,
    386,
    374,
    168,
    1,
    98,
    327,
    0,
    17,
    61,
    291,
    13,
    14,
    205,
    425,
    187,
    411,
)


def face_size(points: np.ndarray) -> float:
    return float(max(np.ptp(points[:, 0]), np.ptp(points[:, 1]), 1.0))


def pose(shape: SourceShape, target: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """The target's pose for the source's mesh: scale, the first two rows of a rotation (2, 3) and the
    rigid points' centre (2,), the scaled-orthographic projection closest to the target (linear least
    squares, then the nearest scaled rotation: equal singular values)."""
    rigid = target.astype(np.float64)[shape.rigid]
    centre = rigid.mean(0)
    fit = (rigid - centre).T @ shape.fit  # (2, 3)
    # the nearest scaled rotation without an SVD: with A = fit fit' (2 x 2), A^(1/2) = (A + r I) / t, where
    # r = sqrt(det A) and t = sqrt(tr A + 2 r) are the singular values' product and sum; U V' = A^(-1/2) fit
    (a, b), (_, d) = (fit @ fit.T).tolist()
    root = math.sqrt(max(a * d - b * b, 0.0))
    t = math.sqrt(max(a + d + 2.0 * root, 0.0))
    if root <= 1e-6 * t * t:  # near rank 1 (a face seen edge-on in both axes): the SVD's answer
        u, s, vt = np.linalg.svd(fit, full_matrices=False)
        return float(s.mean()), u @ vt, centre
    inverse = np.array([[d + root, -b], [-b, a + root]]) * (t / ((a + root) * (d + root) - b * b))
    return 0.5 * t, inverse @ fit, centre


def fitted(shape: SourceShape, target: np.ndarray) -> np.ndarray:
    """The source's mesh seen in the target's pose (468, 2) (`pose`)."""
    scale, rows, centre = pose(shape, target)
    out: np.ndarray = shape.points @ (scale * rows).T + centre
    return out


def triangle_depths(shape: SourceShape, target: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Each triangle's distance from the camera (T,), larger farther, in the target's pose: the source's 3-D
    mesh turned as `fitted` turns it (the rotation's third row is the view axis; its sign puts the nose tip
    nearer than the face's rigid points). A turned face's near cheek, nose and far side then overlap in
    depth order on the target, as they do in the picture."""
    (a0, a1, a2), (b0, b1, b2) = pose(shape, target)[1]
    axis = np.array((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0))  # the rows' cross product
    depth = shape.points @ axis
    if depth[NOSE_TIP] > depth[shape.rigid].mean():
        depth = -depth
    out: np.ndarray = (depth[triangles[:, 0]] + depth[triangles[:, 1]] + depth[triangles[:, 2]]) / 3.0
    return out


def smooth(
    offset: np.ndarray, shape: SourceShape, steps: int = SMOOTH_STEPS, weight: float = SMOOTH_WEIGHT
) -> np.ndarray:
    """`steps` passes moving each point's offset `weight` of the way to its mesh neighbours' mean (a point
    without neighbours keeps its own). Both coordinates in one sum per pass (`SourceShape.pairs`)."""
    n = len(offset)
    out = np.asarray(offset, dtype=np.float64).ravel()
    for _ in range(steps):
        mean = np.bincount(shape.pairs, weights=shape.pair_weights * out[shape.pair_cols], minlength=2 * n)
        mean[shape.lonely] = out[shape.lonely]
        out = out + weight * (mean - out)
    return out.reshape(n, 2)


def smoothed(offset: np.ndarray, shape: SourceShape) -> np.ndarray:
    """The offset smoothed `SMOOTH_STEPS` times inside the face and `OUTLINE_STEPS` times on its silhouette,
    blended by `shape.outline`."""
    inner = smooth(offset, shape, SMOOTH_STEPS)
    outer = smooth(inner, shape, OUTLINE_STEPS - SMOOTH_STEPS)
    return np.asarray(inner + shape.outline * (outer - inner))


def cap(offset: np.ndarray, limit: float) -> np.ndarray:
    """Offsets longer than `limit` shortened to it (direction kept)."""
    length = np.sqrt((offset * offset).sum(1, keepdims=True))
    return np.asarray(offset * np.minimum(1.0, limit / np.maximum(length, 1e-12)))


def mouth_gap(points: np.ndarray, down: np.ndarray) -> float:
    """The inner lips' mean opening along `down`."""
    return float(((points[MOUTH_LOWER] - points[MOUTH_UPPER]) @ down).mean())


def restore_expression(offset: np.ndarray, target: np.ndarray, down: np.ndarray | None = None) -> np.ndarray:
    """The offset with the target's expression put back: the lower lip and the chin shifted so the mouth
    opens as the target's does (the lower face weighted from the upper inner lip down to the lower one), and
    each eye's ring moved as one by its corners' mean offset (the source's placement; the target's outline,
    width and opening). `down`: the target's down axis (`_axes`), when known."""
    t = target.astype(np.float64)
    out = np.array(offset, dtype=np.float64)
    if down is None:
        _, down = _axes(t)
    gap = mouth_gap(out, down)  # how far the offset would open (or close) the mouth
    v = (t - t[13]) @ down
    band = max(float((t[14] - t[13]) @ down), 0.02 * face_size(t))
    w = np.clip(v / band, 0.0, 1.0)
    w[UPPER_LIP_IDX] = 0.0
    w[LOWER_LIP_IDX] = 1.0
    out -= np.outer(w, gap * down)
    for ring, (ca, cb) in zip(EYE_RING_IDX, EYE_CORNERS, strict=True):
        out[ring] = (out[ca] + out[cb]) / 2.0
    return out


def shape_offset(shape: SourceShape, target: np.ndarray, brows_rest: np.ndarray | None = None) -> np.ndarray:
    """Where each of the target's mesh points moves for the source's shape at full strength (468, 2): the
    identity part of the difference (face_expression.split), the target's expression kept; `brows_rest`:
    the session's running rest of the target's brows (face_expression.brows_pose; None: at rest now)."""
    t = target.astype(np.float64)
    rest = at_rest(t, shape.expression, brows_rest)  # the brows' raise stays in the target's pixels
    offset = smoothed(fitted(shape, rest) - rest, shape)
    across, down = _axes(t)
    kept = restore_expression(cap(offset, CAP_FRAC * face_size(t)), t, down)
    return split(kept, shape.expression, across)


# -- the warp ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WarpPlan:
    """The target's pixels moved to the new geometry, for one face.

    `grid`: (GRID, GRID, 2) float32, for output pixel q of the window (frame pixel q + window origin) the
    offset to the frame pixel it samples, at nodes spread evenly from the window's first pixel to its last
    (zero on the outer ring). `landmarks`: the new mesh (468, 2) in frame coordinates. `alpha`: the
    strength used (less than asked where a fold was refused); `refused`: how many times it was scaled back.
    """

    window: tuple[int, int, int, int]
    grid: np.ndarray
    landmarks: np.ndarray
    alpha: float
    refused: int
    min_det: float


def window_of(frame_hw: tuple[int, ...], target: np.ndarray) -> tuple[int, int, int, int] | None:
    """The face's extent grown by WINDOW_GROW of its width / height per side, inside the frame; None under
    8 px."""
    fh, fw = frame_hw[:2]
    box = extent(target)
    gx, gy = WINDOW_GROW * float(box[2] - box[0]), WINDOW_GROW * float(box[3] - box[1])
    x0, y0 = max(int(np.floor(box[0] - gx)), 0), max(int(np.floor(box[1] - gy)), 0)
    x1, y1 = min(int(np.ceil(box[2] + gx)) + 1, fw), min(int(np.ceil(box[3] + gy)) + 1, fh)
    if x1 - x0 < 8 or y1 - y0 < 8:
        return None
    return x0, y0, x1, y1


def _kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The spline's radial basis r² log r² between point sets (n, 2) and (m, 2): (n, m)."""
    dx = a[:, 0, None] - b[None, :, 0]
    dy = a[:, 1, None] - b[None, :, 1]
    r2 = dx * dx + dy * dy
    return np.asarray(r2 * np.log(np.maximum(r2, 1e-20)))


@dataclass(frozen=True)
class SplineFrame:
    """What every window's spline shares: it is solved in the window's own unit square (x / (w - 1),
    y / (h - 1)), where the fixed border points and the evaluated inner nodes are the same for every window,
    so their kernels are computed once. Only the mesh's control points move from frame to frame."""

    border: np.ndarray  # (B, 2) border control points, unit square
    nodes: np.ndarray  # (N, 2) the inner nodes of the GRID x GRID grid (the outer ring is held at zero)
    border_kernel: np.ndarray  # (B, B) _kernel(border, border) + REGULARISE I
    node_border: np.ndarray  # (N, B) _kernel(nodes, border)


@cache
def spline_frame(nodes: int = GRID, per_side: int = BORDER_NODES) -> SplineFrame:
    border = border_points(2, 2, per_side)
    steps = np.arange(1, nodes - 1, dtype=np.float64) / (nodes - 1)
    inner = np.stack(np.meshgrid(steps, steps), -1).reshape(-1, 2)
    return SplineFrame(
        border=border,
        nodes=inner,
        border_kernel=_kernel(border, border) + REGULARISE * np.eye(len(border)),
        node_border=_kernel(inner, border),
    )


def window_spline(moving: np.ndarray, values: np.ndarray, frame: SplineFrame) -> np.ndarray:
    """The spline through `values` (M, 2) at the moving control points `moving` (M, 2, unit square) and
    zero at the frame's border points, evaluated at its inner nodes: (N, 2): the thin-plate spline over the
    moving and the border points together (kernel, constant and linear terms), the border's kernels taken
    from the frame. einsum, not matmul: its own loop, never a threaded BLAS."""
    m, b = len(moving), len(frame.border)
    n = m + b
    controls = np.concatenate([moving, frame.border])
    system = np.zeros((n + 3, n + 3))
    system[:m, :m] = _kernel(moving, moving) + REGULARISE * np.eye(m)
    across = _kernel(moving, frame.border)
    system[:m, m:n] = across
    system[m:n, :m] = across.T
    system[m:n, m:n] = frame.border_kernel
    system[:n, n] = 1.0
    system[:n, n + 1 :] = controls
    system[n, :n] = 1.0
    system[n + 1 :, :n] = controls.T
    rhs = np.zeros((n + 3, 2))
    rhs[:m] = values
    coef = np.linalg.solve(system, rhs)
    out = np.einsum("km,mc->kc", _kernel(frame.nodes, moving), coef[:m])
    out += np.einsum("kb,bc->kc", frame.node_border, coef[m:n])
    return np.asarray(out + coef[n] + np.einsum("kd,dc->kc", frame.nodes, coef[n + 1 :]))


def border_points(h: int, w: int, per_side: int = BORDER_NODES) -> np.ndarray:
    steps = np.arange(per_side, dtype=np.float64) / (per_side - 1)
    xs, ys = steps * (w - 1.0), steps * (h - 1.0)
    pts = [(x, 0.0) for x in xs] + [(x, h - 1.0) for x in xs]
    pts += [(0.0, y) for y in ys[1:-1]] + [(w - 1.0, y) for y in ys[1:-1]]
    return np.asarray(pts, dtype=np.float64)


def min_jacobian(grid: np.ndarray, h: int, w: int) -> float:
    """Smallest determinant of the map q -> q + grid(q) over the grid's cells (bilinear: at cell centres)."""
    nodes_y, nodes_x = grid.shape[:2]
    sx, sy = (w - 1.0) / (nodes_x - 1), (h - 1.0) / (nodes_y - 1)
    g = grid.astype(np.float64)
    ddx = (g[:-1, 1:] - g[:-1, :-1] + g[1:, 1:] - g[1:, :-1]) / (2 * sx)  # d(offset)/dx per cell
    ddy = (g[1:, :-1] - g[:-1, :-1] + g[1:, 1:] - g[:-1, 1:]) / (2 * sy)  # d(offset)/dy
    det = (1.0 + ddx[..., 0]) * (1.0 + ddy[..., 1]) - ddy[..., 0] * ddx[..., 1]
    return float(det.min())


def plan_warp(
    frame_hw: tuple[int, ...], target: np.ndarray, offset: np.ndarray, alpha: float
) -> WarpPlan | None:
    """The warp that moves the target's pixels to target + alpha * offset; None when alpha is 0, the face's
    window is too small, or every scaled-back alpha would still fold the map."""
    if alpha <= 0.0:
        return None
    window = window_of(frame_hw, target)
    if window is None:
        return None
    x0, y0, x1, y1 = window
    h, w = y1 - y0, x1 - x0
    unit = np.array([1.0 / (w - 1.0), 1.0 / (h - 1.0)])
    local = target.astype(np.float64) - (x0, y0)
    ctrl_idx = list(CONTROL)
    frame = spline_frame()
    refused, a = 0, float(alpha)
    worst = 1.0
    grid = np.zeros((GRID, GRID, 2))
    for _ in range(ATTEMPTS + 1):
        moved = offset[ctrl_idx] * a
        inner = window_spline((local[ctrl_idx] + moved) * unit, -moved, frame)
        grid[1:-1, 1:-1] = inner.reshape(GRID - 2, GRID - 2, 2)
        worst = min_jacobian(grid, h, w)
        if worst >= MIN_DET:
            new = (target.astype(np.float64) + a * offset).astype(np.float32)
            return WarpPlan(window, grid.astype(np.float32), new, a, refused, worst)
        refused += 1
        a *= BACKOFF
    return None


def pixel_map(plan: WarpPlan) -> np.ndarray:
    """The cv2.remap map (h, w, 2) float32 in frame coordinates for the plan's window (its first map
    argument, with None as the second)."""
    x0, y0, x1, y1 = plan.window
    h, w = y1 - y0, x1 - x0
    gy, gx = plan.grid.shape[:2]
    to_grid = np.array([[(gx - 1) / (w - 1), 0.0, 0.0], [0.0, (gy - 1) / (h - 1), 0.0]], np.float64)
    offsets: np.ndarray = np.asarray(
        cv2.warpAffine(
            plan.grid,
            to_grid,
            (w, h),
            flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
            borderMode=cv2.BORDER_REPLICATE,
        ),
        dtype=np.float32,
    )
    offsets[..., 0] += np.arange(x0, x1, dtype=np.float32)[None, :]
    offsets[..., 1] += np.arange(y0, y1, dtype=np.float32)[:, None]
    return offsets


def pixel_maps(plan: WarpPlan) -> tuple[np.ndarray, np.ndarray]:
    """`pixel_map` as two maps (x, y)."""
    both = pixel_map(plan)
    return np.ascontiguousarray(both[..., 0]), np.ascontiguousarray(both[..., 1])
