"""The source's 3-D face shape, read once per source: its mesh centred on the points that move with the head
only, the fit every frame reuses, the mesh's neighbour graph and its expression partition. Per frame,
engines.processors.face_shape fits it onto the target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engines.source.expression import expression_weights
from engines.source.validity import FACE_OVAL

EYE_A, EYE_B = (33, 133), (362, 263)
BROWS = (70, 63, 105, 66, 107, 336, 296, 334, 293, 300)


@dataclass(frozen=True)
class SourceShape:
    """The source's 3-D mesh, centred, with what every frame's fit and smoothing reuse."""

    points: np.ndarray  # (468, 3) float64, centred on the rigid points' mean
    rigid: np.ndarray  # (R,) indices: the upper face without eyes and brows (they blink and frown)
    fit: np.ndarray  # (R, 3): the rigid points' (pointsᵀ points)⁻¹ points, so the fit is one product
    rows: np.ndarray  # (E,) int: mesh edges in both directions, point...
    cols: np.ndarray  # (E,) int: ...and its neighbour...
    weights: np.ndarray  # (E,) float: ...weighted 1 / the point's degree
    expression: np.ndarray  # (468, 4): weights toward the mouth's and the brows' anchors (face_expression)
    # Derived: the neighbour sums over both coordinates at once (a flattened (468, 2) offset): each edge's
    # x and y entry (2 E,), the entry it reads, its weight; the entries of points without neighbours.
    pairs: np.ndarray = field(init=False, repr=False)
    pair_cols: np.ndarray = field(init=False, repr=False)
    pair_weights: np.ndarray = field(init=False, repr=False)
    lonely: np.ndarray = field(init=False, repr=False)
    # (468, 1): 1 on the silhouette ring (FACE_OVAL), on its neighbours the share of their neighbours on it,
    # 0 elsewhere: where face_shape smooths the offset more (the outline, where the paste meets the target)
    outline: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rows, cols = np.asarray(self.rows, np.int64), np.asarray(self.cols, np.int64)
        object.__setattr__(self, "pairs", np.concatenate([2 * rows, 2 * rows + 1]))
        object.__setattr__(self, "pair_cols", np.concatenate([2 * cols, 2 * cols + 1]))
        object.__setattr__(self, "pair_weights", np.concatenate([self.weights, self.weights]))
        alone = np.nonzero(np.bincount(rows, minlength=len(self.points)) == 0)[0]
        object.__setattr__(self, "lonely", np.concatenate([2 * alone, 2 * alone + 1]))
        ring = np.zeros(len(self.points))
        ring[list(FACE_OVAL)] = 1.0
        share = np.bincount(rows, weights=self.weights * ring[cols], minlength=len(self.points))
        object.__setattr__(self, "outline", np.maximum(ring, share)[:, None])


def source_shape(landmarks: np.ndarray, depth: np.ndarray, triangles: np.ndarray) -> SourceShape:
    """The source's shape from its mesh (468, 2), its depth (468,) in the same pixels, and its triangles."""
    pts = np.column_stack([landmarks.astype(np.float64), depth.astype(np.float64)])
    rigid = rigid_points(pts[:, :2])
    pts -= pts[rigid].mean(0)
    r = pts[rigid]
    fit = r @ np.linalg.inv(r.T @ r)
    t = np.asarray(triangles, dtype=np.int64)
    edges = np.unique(
        np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]], t[:, [1, 0]], t[:, [2, 1]], t[:, [0, 2]]]),
        axis=0,
    )
    degree = np.bincount(edges[:, 0], minlength=len(pts)).astype(np.float64)
    return SourceShape(
        points=pts,
        rigid=rigid,
        fit=fit,
        rows=edges[:, 0],
        cols=edges[:, 1],
        weights=1.0 / degree[edges[:, 0]],
        expression=expression_weights(pts),
    )


def rigid_points(points: np.ndarray) -> np.ndarray:
    """Mesh points that move with the head only: above the nose tip, away from the eyes (lids blink) and the
    brows (they frown). The pose is fitted on these, so a talking mouth or a blink does not tilt it."""
    _, down = _axes(points)
    eyes = [points[list(EYE_A)].mean(0), points[list(EYE_B)].mean(0)]
    width = max(
        float(np.linalg.norm(points[133] - points[33])), float(np.linalg.norm(points[263] - points[362]))
    )
    v = (points - (eyes[0] + eyes[1]) / 2) @ down
    far = np.ones(len(points), bool)
    for c in eyes:
        far &= np.linalg.norm(points - c, axis=1) > 0.8 * width
    brow_v = float(v[list(BROWS)].mean())
    keep = far & (v <= v[1]) & (v >= 0.3 * brow_v)
    keep[list(BROWS)] = False
    return np.nonzero(keep)[0]


def _axes(target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = target[list(EYE_A)].mean(0), target[list(EYE_B)].mean(0)
    across = (b - a) / max(float(np.linalg.norm(b - a)), 1e-9)
    return across, np.array([-across[1], across[0]])
