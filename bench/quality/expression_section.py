"""The quality report's expression section: does the swap keep the target's smile and its talking mouth?

For every (source, target) case, with the target's shape (`shape` 0) and the default: the teeth the output
keeps (teeth-like pixels, bright and grey, inside the target's inner mouth, placed in the output where the
target's own mouth corners are found by template matching (`mouth_corners`): output / target; the skin
around a mouth can be as bright and grey as teeth, so none of it is counted), the teeth share of each one's
inner mouth (their own FaceMesh), and the mouth's width (the matched corners' distance over the target's;
FaceMesh's reading of the output, which carries a bias of up to 8 %, beside it). A smile squeezed to a
closed-mouth source's width keeps fewer teeth and a narrower mouth. The verdict holds the smiling targets
(named, chosen before the split was tuned) to TEETH_KEPT and WIDTH_TOLERANCE. On the talking clip: the
mouth's width, output against target, frame by frame. Swap and mesh are callables (the report's `Study`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cv2
import numpy as np

from bench.quality.identity import correlation
from bench.quality.mouth_corners import MOUTH_CORNERS, matched_corners, mouth_width, width_ratio
from engines.frames import FACE_SHAPE, KEPT_REGIONS
from engines.processors.face_detector import Face
from engines.processors.masks import INNER_LIPS

SMILING = ("astronaut", "t1 laughing", "obama")  # targets smiling or laughing with the mouth open
TEETH_KEPT = 0.9  # at the default, the output keeps at least this share of the target's teeth pixels...
WIDTH_TOLERANCE = 0.05  # ...and its mouth is this close to the target's width (relative)
FOLLOW = 0.1  # the target's opening is followed this far (of its mouth's width) to the output's teeth
TEETH_MIN = 30  # fewer teeth pixels than this have no width
COLUMNS = {"shape_0": 0.0, "default": FACE_SHAPE}

ShapeSwap = Callable[[np.ndarray, Any, tuple[str, ...], float], tuple[np.ndarray, Face | None]]
Mesh = Callable[[np.ndarray], Face | None]


def teeth_pixels(image: np.ndarray) -> np.ndarray:
    """Teeth-like pixels (bool, h x w): bright (channel mean > 150) and grey (channel spread < 30)."""
    px = image.astype(np.float32)
    return np.asarray((px.mean(2) > 150) & (px.std(2) < 30))


def _ring(shape: tuple[int, ...], landmarks: np.ndarray, ring: Sequence[int], grow: int = 0) -> np.ndarray:
    mask = np.zeros(shape[:2], np.uint8)
    cv2.fillPoly(mask, [np.round(landmarks[list(ring)]).astype(np.int32)], 255)
    if grow > 0:
        mask = np.asarray(cv2.dilate(mask, np.ones((2 * grow + 1,) * 2, np.uint8)))
    return mask > 0


def teeth_span(teeth: np.ndarray, landmarks: np.ndarray) -> float | None:
    """How wide the teeth show: the 2nd to 98th percentile of their positions along the eye line (px);
    None under TEETH_MIN pixels."""
    if int(teeth.sum()) < TEETH_MIN:
        return None
    ys, xs = np.nonzero(teeth)
    across = landmarks[263].astype(np.float64) - landmarks[33].astype(np.float64)
    across /= max(float(np.linalg.norm(across)), 1e-6)
    t = xs * across[0] + ys * across[1]
    lo, hi = np.percentile(t, [2, 98])
    return float(hi - lo)


def follow(teeth: np.ndarray, inner: np.ndarray, reach: int) -> np.ndarray:
    """`inner` (bool) shifted by up to `reach` px each way to where it holds the most `teeth`: the target's
    opening followed to the output's mouth, which the source's face shape may move a few pixels."""
    ys, xs = np.nonzero(inner)
    h, w = teeth.shape
    best, best_count = inner, -1
    for dy in range(-reach, reach + 1):
        for dx in range(-reach, reach + 1):
            y, x = ys + dy, xs + dx
            ok = (y >= 0) & (y < h) & (x >= 0) & (x < w)
            count = int(teeth[y[ok], x[ok]].sum())
            if count > best_count:
                best_count = count
                best = np.zeros_like(inner)
                best[y[ok], x[ok]] = True
    return best


def _teeth_measures(
    t_mask: np.ndarray, o_mask: np.ndarray, target_lm: np.ndarray
) -> tuple[int, float | None, float | None]:
    """The target's teeth pixels, teeth kept (output / target) and the teeth's width ratio."""
    t_teeth, o_teeth = int(t_mask.sum()), int(o_mask.sum())
    t_span, o_span = teeth_span(t_mask, target_lm), teeth_span(o_mask, target_lm)
    kept = round(o_teeth / t_teeth, 3) if t_teeth >= TEETH_MIN else None
    return t_teeth, kept, round(o_span / t_span, 3) if t_span and o_span else None


def mouth_measure(
    target: np.ndarray, target_lm: np.ndarray, output: np.ndarray, output_lm: np.ndarray | None
) -> dict[str, Any]:
    """Teeth kept (output / target), each inner mouth's teeth share, and the mouth width ratio (output /
    target).

    The output's mouth is found by the target's own corners (`mouth_corners`: template matches of the
    target's edges, which read the target itself as 1.00): `mouth_width_ratio` is their distance
    over the target's width, and the teeth are counted inside the target's inner mouth moved by the two
    corners' mean shift, in the output, and inside the target's inner mouth itself, in the target (around
    it, a pale face's skin passes for teeth). Kept beside them: `mouth_width_ratio_facemesh` (FaceMesh on
    the output, which reads a swapped mouth up to 8 % narrower; None where it found no face) and
    `teeth_kept_most` (the inner mouth placed in each picture by up to `FOLLOW` of the mouth's width where it
    holds the most teeth)."""
    t_inner = _ring(target.shape, target_lm, INNER_LIPS)
    t_all, o_all = teeth_pixels(target), teeth_pixels(output)
    corners = matched_corners(target, target_lm, output)
    shift = np.zeros(2) if corners is None else (corners - target_lm[list(MOUTH_CORNERS)]).mean(0)
    o_inner = _ring(output.shape, target_lm.astype(np.float64) + shift, INNER_LIPS)
    t_teeth, kept, teeth_width = _teeth_measures(t_all & t_inner, o_all & o_inner, target_lm)
    reach = max(1, int(round(FOLLOW * mouth_width(target_lm))))
    t_most = t_all & follow(t_all, t_inner, reach) if t_inner.any() else t_inner
    o_most = o_all & follow(o_all, t_inner, reach) if t_inner.any() else t_inner
    _, kept_most, _ = _teeth_measures(t_most, o_most, target_lm)
    out: dict[str, Any] = {
        "target_teeth_px": t_teeth,
        "teeth_kept": kept,
        "teeth_kept_most": kept_most,
        "teeth_share": {
            "target": round(float(t_all[t_inner].mean()), 3) if t_inner.any() else None,
            "output": None,
        },
        "teeth_width_ratio": teeth_width,
        "mouth_width_ratio": None if corners is None else round(width_ratio(target_lm, corners), 3),
        "mouth_width_ratio_facemesh": None,
    }
    if output_lm is not None:
        o_mesh_inner = _ring(output.shape, output_lm, INNER_LIPS)
        if o_mesh_inner.any():
            out["teeth_share"]["output"] = round(float(o_all[o_mesh_inner].mean()), 3)
        ratio = mouth_width(output_lm) / max(mouth_width(target_lm), 1e-6)
        out["mouth_width_ratio_facemesh"] = round(ratio, 3)
    return out


def expression_cases(
    swap: ShapeSwap,
    mesh: Mesh,
    sources: Mapping[str, tuple[np.ndarray, Any]],
    targets: Mapping[str, np.ndarray],
    pairs: Sequence[tuple[str, str]],
) -> dict[str, Any]:
    """{"source -> target": {column: mouth_measure}} with the target's shape and the default."""
    out: dict[str, Any] = {}
    target_meshes = {name: mesh(image) for name, image in targets.items()}
    for sname, tname in pairs:
        case = f"{sname} -> {tname}"
        tface = target_meshes[tname]
        if tface is None or tface.landmarks is None:
            out[case] = {"error": "no face in the target"}
            continue
        cell: dict[str, Any] = {}
        for column, alpha in COLUMNS.items():
            result, face = swap(targets[tname], sources[sname][1], KEPT_REGIONS, alpha)
            if face is None:
                cell[column] = {"error": "no face swapped"}
                continue
            got = mesh(result)
            cell[column] = mouth_measure(
                targets[tname], tface.landmarks, result, got.landmarks if got is not None else None
            )
        out[case] = cell
    return out


def verdict(cases: Mapping[str, Any], smiling: Sequence[str] = SMILING) -> dict[str, Any]:
    """Per column, on the smiling targets' cases: the smallest teeth kept, the largest width error, and how
    many cases meet TEETH_KEPT and WIDTH_TOLERANCE (with the matched corners' width); beside them the same
    by the older readings (`teeth_kept_most`, FaceMesh's width)."""
    out: dict[str, Any] = {
        "smiling_targets": list(smiling),
        "teeth_kept_target": TEETH_KEPT,
        "width_tolerance": WIDTH_TOLERANCE,
    }
    for column in COLUMNS:
        kept, widths, passed, n = [], [], 0, 0
        most: list[float] = []
        facemesh: list[float] = []
        for case, cell in cases.items():
            if case.split(" -> ", 1)[1] not in smiling or "teeth_kept" not in cell.get(column, {}):
                continue
            m = cell[column]
            n += 1
            k, r = m["teeth_kept"], m["mouth_width_ratio"]
            if k is not None:
                kept.append(k)
            if r is not None:
                widths.append(abs(r - 1.0))
            if m.get("teeth_kept_most") is not None:
                most.append(m["teeth_kept_most"])
            if m.get("mouth_width_ratio_facemesh") is not None:
                facemesh.append(abs(m["mouth_width_ratio_facemesh"] - 1.0))
            passed += k is not None and k >= TEETH_KEPT and r is not None and abs(r - 1.0) <= WIDTH_TOLERANCE
        out[column] = {
            "cases": n,
            "passed": passed,
            "min_teeth_kept": min(kept) if kept else None,
            "mean_teeth_kept": round(float(np.mean(kept)), 3) if kept else None,
            "max_width_error": round(max(widths), 3) if widths else None,
            "min_teeth_kept_most": min(most) if most else None,
            "max_width_error_facemesh": round(max(facemesh), 3) if facemesh else None,
        }
    return out


def clip_mouth(
    outputs: Sequence[tuple[np.ndarray, Face | None]], frames: Sequence[np.ndarray], mesh: Mesh
) -> dict[str, Any]:
    """On a clip: the output's mouth width against the target's, frame by frame (both from FaceMesh): the
    mean and largest relative error and the two series' correlation."""
    target_w, output_w = [], []
    for (image, _), frame in zip(outputs, frames, strict=True):
        t, o = mesh(frame), mesh(image)
        if t is None or o is None or t.landmarks is None or o.landmarks is None:
            continue
        target_w.append(mouth_width(t.landmarks))
        output_w.append(mouth_width(o.landmarks))
    if not target_w:
        return {"frames_measured": 0}
    ratio = np.asarray(output_w) / np.maximum(np.asarray(target_w), 1e-6)
    return {
        "frames_measured": len(target_w),
        "mean_width_error": round(float(np.abs(ratio - 1.0).mean()), 3),
        "max_width_error": round(float(np.abs(ratio - 1.0).max()), 3),
        "width_correlation": None if (c := correlation(target_w, output_w)) is None else round(c, 3),
    }
