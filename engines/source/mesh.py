"""A source face made ready for mesh_warp, once per source: its triangulated mesh, blend points, validity map,
3-D shape and, turned, its far half read from its near half.

`prepare` runs at upload; `MeshSource` holds the result and what every frame's warp reuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np

from engines.source.completion import completed
from engines.source.highlights import tamed
from engines.source.mirror import (
    far_side,
    frontal_layout,
    midline_pulled,
    mirrored_reads,
    sides,
    symmetrised,
)
from engines.source.shape import SourceShape
from engines.source.shape import source_shape as make_source_shape
from engines.source.validity import FACE_OVAL, fill_outside, validity_map

FOREHEAD_KEEP = 1.5  # keep this much forehead above the brows (fraction of the brow-to-eye distance)
EYE_A = (33, 133)
EYE_B = (362, 263)
BROWS = (70, 63, 105, 66, 107, 336, 296, 334, 293, 300)
# FACE_OVAL (source_validity) is FaceMesh's silhouette ring. Those points sit exactly on the face's edge, so
# texture sampled at them is half background; the source side of the ring is pulled in toward the centre.
OVAL_PULL = 0.06  # fraction of the distance to the mesh centre
TEXTURE_PAD = 4  # px of the image kept around the mesh's box in the warp's texture


@dataclass(frozen=True)
class MeshSource:
    """A source face ready to be warped: its pixels, its mesh and the triangulation reused every frame."""

    image: np.ndarray  # (H, W, 3) uint8 RGB, the source image
    landmarks: np.ndarray  # (468, 2) float32 in source image coordinates
    triangles: np.ndarray  # (T, 3) int32 indices into landmarks
    mask_points: np.ndarray  # indices whose hull is the blend mask (the face without the upper forehead)
    validity: np.ndarray | None = None  # (H, W) uint8: where the source may be pasted (None: everywhere)
    shape: SourceShape | None = None  # its 3-D shape (None: no depth known, the target's shape stays)
    # (T, 3): the points each triangle reads its texture at (None: its own corners; a turned source's far
    # half reads its mirror image, `face_mirror`), and the face-on layout (468, 2) the triangles were made
    # on, whose winding tells a back-facing target triangle (None: the source's own 2-D mesh)
    reads: np.ndarray | None = None
    layout: np.ndarray | None = None
    # Derived once (the source never changes): the texture every frame's warp samples, the mesh's box in
    # the image (`TEXTURE_PAD` px around it) in float32 CIE L*a*b* with the validity (0..255) as a fourth
    # channel (one remap warps both; the relight reads L*a*b*, converted here once, not per frame); the box's
    # corner in the image (x, y); (T, 3, 2) source triangles in the texture's coordinates, the sign of their
    # area, and their edge vectors from the first vertex (T, 2, 2), which every frame's barycentric maps
    # multiply; the mesh's extent (px, its larger side).
    lab: np.ndarray = field(init=False, repr=False)
    origin: tuple[int, int] = field(init=False, repr=False)
    tris: np.ndarray = field(init=False, repr=False)
    orientation: np.ndarray = field(init=False, repr=False)
    edges: np.ndarray = field(init=False, repr=False)
    span: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        points = self.landmarks.astype(np.float64)
        ih, iw = self.image.shape[:2]
        x0, y0 = np.maximum(np.floor(points.min(0)).astype(int) - TEXTURE_PAD, 0)
        x1, y1 = np.minimum(np.ceil(points.max(0)).astype(int) + TEXTURE_PAD + 1, (iw, ih))
        box = np.s_[int(y0) : int(y1), int(x0) : int(x1)]
        if self.validity is None:
            pixels, valid = self.image[box], np.full((int(y1 - y0), int(x1 - x0)), 255, np.uint8)
        else:  # the feathered edge's outer half shows the source's skin, not what the map refused
            pixels, valid = fill_outside(self.image, self.validity)[box], self.validity[box]
        tris = (points - (x0, y0))[self.triangles if self.reads is None else self.reads]
        made_on = self.landmarks if self.layout is None else self.layout
        object.__setattr__(self, "lab", lab_texture(pixels, valid))
        object.__setattr__(self, "origin", (int(x0), int(y0)))
        object.__setattr__(self, "span", float(np.ptp(points, axis=0).max()))
        object.__setattr__(self, "tris", tris)
        object.__setattr__(
            self, "orientation", np.sign(signed_areas(made_on.astype(np.float64)[self.triangles]))
        )
        object.__setattr__(self, "edges", tris[:, 1:] - tris[:, :1])

    @property
    def box_image(self) -> np.ndarray:
        """The source image over the texture's box (uint8 RGB, a view): what the warp's maps index."""
        x0, y0 = self.origin
        h, w = self.lab.shape[:2]
        return self.image[y0 : y0 + h, x0 : x0 + w]


def lab_texture(pixels: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(h, w, 4) float32: RGB `pixels` (h, w, 3 uint8) in CIE L*a*b* (OpenCV's float conversion: L* 0..100)
    and the validity `valid` (h, w uint8) as it is (0..255)."""
    rgb = np.multiply(pixels, np.float32(1.0 / 255.0), dtype=np.float32)
    lab = cv2.cvtColor(rgb, cv2.COLOR_RGB2LAB)
    return np.ascontiguousarray(np.dstack([lab, valid.astype(np.float32)]))


def triangulate(points: np.ndarray) -> np.ndarray:
    """Delaunay triangles of `points` as index triples (T, 3)."""
    lo = np.floor(points.min(0)) - 2
    hi = np.ceil(points.max(0)) + 2
    subdiv = cv2.Subdiv2D((int(lo[0]), int(lo[1]), int(hi[0] - lo[0]) + 1, int(hi[1] - lo[1]) + 1))
    subdiv.insert([(float(x), float(y)) for x, y in points])
    tris = np.asarray(subdiv.getTriangleList(), dtype=np.float32).reshape(-1, 3, 2)
    inside = np.all((tris >= lo) & (tris <= hi), axis=(1, 2))  # drop triangles on Subdiv2D's outer vertices
    tris = tris[inside]
    d = np.linalg.norm(tris.reshape(-1, 1, 2) - points[None, :, :], axis=2)
    idx = d.argmin(1).reshape(-1, 3).astype(np.int32)
    distinct = (idx[:, 0] != idx[:, 1]) & (idx[:, 1] != idx[:, 2]) & (idx[:, 0] != idx[:, 2])
    return idx[distinct]


def face_mask_points(points: np.ndarray) -> np.ndarray:
    """Mesh points below a line `FOREHEAD_KEEP` brow-to-eye distances above the eyebrows.

    The mesh's upper forehead is often hair (fringes) in the target; blending it smears the source's skin
    over that hair, so the mask stops part way up the forehead (the source's own hair is left out by its
    validity). The lower forehead's lines and shape are the source's: an embedder reads them as identity.
    """
    a, b = points[list(EYE_A)].mean(0), points[list(EYE_B)].mean(0)
    across = (b - a) / max(float(np.linalg.norm(b - a)), 1e-6)
    down = np.array([-across[1], across[0]])
    v = (points - (a + b) / 2) @ down
    brow = float(v[list(BROWS)].mean())
    return np.nonzero(v >= brow * (1.0 + FOREHEAD_KEEP))[0].astype(np.int32)


def prepare(image: np.ndarray, landmarks: np.ndarray, depth: np.ndarray | None = None) -> MeshSource:
    """The source's swap data: triangulation, blend points, validity map, its pixels with strong highlights
    tamed (`highlights`) and (with `depth`, the mesh's (468,) depth in the same pixels) its 3-D shape, the
    triangles made on its face-on layout and, turned, its far half read from its near half (`face_mirror`)."""
    pts = landmarks.astype(np.float32)
    sample = pts.copy()  # where the source texture is read: the silhouette ring a little inside the face
    centre = pts.mean(0)
    ring = list(FACE_OVAL)
    sample[ring] = centre + (pts[ring] - centre) * (1.0 - OVAL_PULL)
    image = np.ascontiguousarray(image)
    if depth is None:
        triangles, validity = triangulate(pts), validity_map(image, pts)
        return MeshSource(tamed(image, pts, validity), sample, triangles, face_mask_points(pts), validity)
    points = np.column_stack([pts.astype(np.float64), np.asarray(depth, dtype=np.float64)])
    far = far_side(points)
    # a turned source is triangulated face on (its 2-D mesh folds its far side behind the nose); the ring
    # is pulled in there too, so the same thin rim triangles turn over and are left out as on a frontal one
    layout = frontal_layout(points) if far else None
    triangles = triangulate(pts if layout is None else layout.astype(np.float32))
    shaped = symmetrised(points, far)
    side = sides(points)
    sample = midline_pulled(sample, triangles, side, far).astype(np.float32)
    if layout is not None:
        centre = layout.mean(0)
        layout[ring] = centre + (layout[ring] - centre) * (1.0 - OVAL_PULL)
    # a turned nose's ridge is outline too: the light past it passes the nose's looser colour test
    validity = validity_map(image, pts, depth, triangles, ridge=bool(far))
    if not far:  # skin under a strand of hair, read on the face's other side
        image, validity = completed(image, validity, pts, triangles)
    image = tamed(image, pts, validity)
    return MeshSource(
        image=image,
        landmarks=sample,
        triangles=triangles,
        mask_points=face_mask_points(pts),
        validity=validity,
        shape=make_source_shape(shaped[:, :2], shaped[:, 2], triangles),
        reads=mirrored_reads(triangles, side, far) if far else None,
        layout=layout,
    )


def signed_areas(tris: np.ndarray) -> np.ndarray:
    """Twice the signed area of each (T, 3, 2) triangle (positive = counter-clockwise in image axes)."""
    a, b, c = tris[:, 0], tris[:, 1], tris[:, 2]
    return (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
