"""FaceMesh's left/right symmetry, and a turned source's far side completed from its near side (once).

Why: a source in three-quarter view or profile shows its far cheek edge-on (a few smeared columns, or the
wall behind); the validity map keeps them off the target, and half the target's face would stay the target's.
The mesh is symmetric by construction, so when the source is turned past `MIRROR_YAW` (read from its own 3-D
mesh) every far-half point reads its texture at its mirror point (`MIRROR[i]`: point i's mirror image, derived
once from two frontal meshes, docs/BENCHMARKS.md "Picture: the source's face shape"), and the far half's 3-D
shape is the near half's, reflected (`symmetrised`), so shape and skin agree. Whole halves, one read position
per point, keep the texture continuous across every edge (mirrored single triangles showed seams). A frontal
source is read as it is: its own asymmetry is part of who it is.
"""

from __future__ import annotations

import numpy as np

# fmt: off
MIRROR = (
    0, 1, 2, 248, 4, 5, 6, 249, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
    250, 251, 252, 253, 254, 255, 256, 257, 258, 259, 260, 261, 262, 263, 264, 265, 266, 267, 268, 269,
    270, 271, 272, 273, 274, 275, 276, 277, 278, 279, 280, 281, 282, 283, 284, 285, 286, 287, 288, 289,
    290, 291, 292, 293, 294, 295, 296, 297, 298, 299, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309,
    310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 320, 321, 322, 323, 94, 324, 325, 326, 327, 328,
    329, 330, 331, 332, 333, 334, 335, 336, 337, 338, 339, 340, 341, 342, 343, 344, 345, 346, 347, 348,
    349, 350, 351, 352, 353, 354, 355, 356, 357, 358, 359, 360, 361, 362, 363, 364, 365, 366, 367, 368,
    369, 370, 371, 372, 373, 374, 375, 376, 377, 378, 379, 151, 152, 380, 381, 382, 383, 384, 385, 386,
    387, 388, 389, 390, 164, 391, 392, 393, 168, 394, 395, 396, 397, 398, 399, 175, 400, 401, 402, 403,
    404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 418, 195, 419, 197, 420, 199,
    200, 421, 422, 423, 424, 425, 426, 427, 428, 429, 430, 431, 432, 433, 434, 435, 436, 437, 438, 439,
    440, 441, 442, 443, 444, 445, 446, 447, 448, 449, 450, 451, 452, 453, 454, 455, 456, 457, 458, 459,
    460, 461, 462, 463, 464, 465, 466, 467, 3, 7, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
    30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49,
    50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69,
    70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89,
    90, 91, 92, 93, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110,
    111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 130,
    131, 132, 133, 134, 135, 136, 137, 138, 139, 140, 141, 142, 143, 144, 145, 146, 147, 148, 149, 150,
    153, 154, 155, 156, 157, 158, 159, 160, 161, 162, 163, 165, 166, 167, 169, 170, 171, 172, 173, 174,
    176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 196,
    198, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219,
    220, 221, 222, 223, 224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239,
    240, 241, 242, 243, 244, 245, 246, 247,
)
# fmt: on
MIRROR_YAW = 25.0  # degrees: a source turned further reads its far half from its near half
MIDLINE_PULL = 0.4  # there, the midline is read this far toward its near-half neighbours (see midline_pulled)


def mirror_index() -> np.ndarray:
    """MIRROR as an index array (468,)."""
    return np.asarray(MIRROR, dtype=np.int64)


def frontal_axes(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors (3,) across the face (from its right side to its left: image right on a frontal face)
    and down it (brow to chin), from a 3-D mesh (468, 3): the symmetry's own axis, so a turned head's yaw
    shows as the across axis leaving the image plane."""
    pts = np.asarray(points, dtype=np.float64)
    m = mirror_index()
    pairs = pts - pts[m]  # across vectors, each pair twice with opposite signs
    guide = pts[[263, 362]].mean(0) - pts[[33, 133]].mean(0)
    across = (pairs * np.sign(pairs @ guide)[:, None]).sum(0)
    across /= max(float(np.linalg.norm(across)), 1e-12)
    down = pts[152] - pts[10]
    down -= (down @ across) * across
    down /= max(float(np.linalg.norm(down)), 1e-12)
    return across, down


def frontal_layout(points: np.ndarray) -> np.ndarray:
    """The 3-D mesh (468, 3) turned face on and projected (468, 2), in its own units: triangulated instead
    of the image's 2-D mesh, a turned source's far side is laid out as a face, not folded behind its nose."""
    pts = np.asarray(points, dtype=np.float64)
    across, down = frontal_axes(pts)
    centred = pts - pts.mean(0)
    return np.column_stack([centred @ across, centred @ down])


def sides(points: np.ndarray) -> np.ndarray:
    """(468,) +1 on the face's left half, -1 on its right, 0 on the midline (a point that is its own
    mirror)."""
    pts = np.asarray(points, dtype=np.float64)
    across, _ = frontal_axes(pts)
    m = mirror_index()
    side = np.sign((pts - pts[m]) @ across).astype(np.int64)
    side[m == np.arange(len(m))] = 0
    return side


def yaw_degrees(points: np.ndarray) -> float:
    """How far the head is turned left or right (degrees, unsigned), from a 3-D mesh (468, 3)."""
    across, _ = frontal_axes(points)
    return float(np.degrees(np.arcsin(min(abs(float(across[2])), 1.0))))


def far_side(points: np.ndarray) -> int:
    """The half (+1 the face's left, -1 its right, as `sides`) turned away from the camera, or 0 when the
    source is turned less than MIRROR_YAW. `points`: the 3-D mesh (468, 3) in image pixels (x, y, depth).
    The far half is the one the image narrows most against the face-on layout (its points' distance from
    the midline): no assumption on the depth's sign."""
    pts = np.asarray(points, dtype=np.float64)
    if yaw_degrees(pts) < MIRROR_YAW:
        return 0
    side = sides(pts)
    layout = frontal_layout(pts)
    mid = side == 0
    across, _ = frontal_axes(pts)
    axis = across[:2] / max(float(np.linalg.norm(across[:2])), 1e-12)  # across the face, in the image
    seen = np.abs((pts[:, :2] - pts[mid, :2].mean(0)) @ axis)
    face_on = np.abs(layout[:, 0] - layout[mid, 0].mean())
    kept = {s: float(seen[side == s].mean()) / max(float(face_on[side == s].mean()), 1e-12) for s in (-1, 1)}
    return min(kept, key=lambda s: kept[s])


def mirrored_reads(triangles: np.ndarray, side: np.ndarray, far: int) -> np.ndarray:
    """(T, 3) the points each triangle reads its texture at: each corner on the `far` half (`side` per
    point as `sides` gives) reads at its mirror image, every other corner at itself. Per corner, not per
    triangle: each point has one read position, so the texture stays continuous across every edge, and a
    triangle astride the midline (the ridge of a turned nose, whose far flank is hidden) reads the near
    flank instead of the background past it."""
    tris = np.asarray(triangles, dtype=np.int64)
    if far == 0:
        return tris.copy()
    return np.asarray(np.where(side[tris] == far, mirror_index()[tris], tris))


def symmetrised(points: np.ndarray, far: int) -> np.ndarray:
    """The 3-D mesh (468, 3) with its `far` half replaced by its near half reflected across the face's
    symmetry plane (the midline points' centre, normal to the across axis; the midline moved onto it): the
    shape a turned source's far half is read with, like its texture. `far` 0: the mesh as it is."""
    pts = np.asarray(points, dtype=np.float64)
    if far == 0:
        return pts.copy()
    side = sides(pts)
    across, _ = frontal_axes(pts)
    centre = pts[side == 0].mean(0)
    near = pts[mirror_index()[side == far]]
    out = pts.copy()
    out[side == far] = near - 2.0 * ((near - centre) @ across)[:, None] * across[None, :]
    mid = pts[side == 0]
    out[side == 0] = mid - ((mid - centre) @ across)[:, None] * across[None, :]  # onto the plane
    return out


def midline_pulled(read: np.ndarray, triangles: np.ndarray, side: np.ndarray, far: int) -> np.ndarray:
    """Read positions (468, 2) with each midline point moved MIDLINE_PULL of the way toward the mean of its
    mesh neighbours on the near half. On a turned face the midline is the silhouette (the nose's ridge
    against the background, as the outline ring is on a frontal one): read at the ridge itself, both
    halves' nose strips would show the wall behind it."""
    out = np.array(read, dtype=np.float64)
    if far == 0:
        return out
    tris = np.asarray(triangles, dtype=np.int64)
    edges = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
    edges = np.concatenate([edges, edges[:, ::-1]])
    edges = edges[(side[edges[:, 0]] == 0) & (side[edges[:, 1]] == -far)]
    edges = np.unique(edges, axis=0)
    n = len(out)
    count = np.bincount(edges[:, 0], minlength=n).astype(np.float64)
    total = np.stack([np.bincount(edges[:, 0], weights=out[edges[:, 1], c], minlength=n) for c in (0, 1)], 1)
    has = count > 0
    near_mean = total[has] / count[has, None]
    out[has] += MIDLINE_PULL * (near_mean - out[has])
    return out
