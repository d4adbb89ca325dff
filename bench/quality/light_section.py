"""The quality report's light section: the seam, the target's light on the source's skin, lid and brow colour.

Each identity case at the default is measured against the target's own pixels where the paste goes:
- seam: the luminance gradient across the blend's edge band (paste alpha 0.2-0.8), RMS, output over target;
  also apart where the face meets the target's skin (`seam_outline`; per side of the face,
  `seam_outline_sides`) and its kept lips and eyes (`seam_kept`);
- shading: the skin's low-passed luminance (at SHADING_SIGMA of the face size) against the target's: mean
  absolute difference and correlation (a source's highlight or shadow is a difference the target lacks);
- lids and brows: their a*b* relative to the cheeks' in the output, against the same in the source photo.
The new pairs include two sources relit in image space (`side_lit`: a hard key light from one side, a warm
tint, a specular spot), independent of the swap's own model of shading.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cv2
import numpy as np

from bench.quality.shape_section import mesh_of
from engines.frames import FACE_SHAPE, KEPT_REGIONS, SourceFace
from engines.processors.face_detector import Face
from engines.processors.face_shape import plan_warp, shape_offset
from engines.processors.masks import (
    BROW_LEFT,
    BROW_RIGHT,
    EYE_LEFT,
    EYE_RIGHT,
    face_size_of,
    region_mask,
    skin_weight,
)
from engines.processors.mesh_warp import MeshWarpSwapper
from engines.processors.mouth_hold import held_remap
from engines.processors.paste import paste_back

SHADING_SIGMA = 0.025
LID_GROW = 0.03  # the lid band: the eye ring grown by this fraction of the face size, less the opening
# (source, target, relit from): the new pairs, fixed before any tuning of the light
LIGHT_PAIRS = (
    ("biden", "obama2", None),
    ("obama2 side-lit", "astronaut", "left"),
    ("biden side-lit", "t1 laughing", "right"),
)

Mesh = Callable[[np.ndarray], Face | None]
SIDES = ("top", "right", "bottom", "left")  # quarters of the outline's band, as the picture shows them


def side_of(angle: np.ndarray) -> np.ndarray:
    """Each angle's quarter (degrees from the face's centre, image axes: y down), as an index into SIDES:
    top -135..-45, right -45..45, bottom 45..135, left the rest."""
    return np.asarray(((np.asarray(angle) + 135.0) % 360.0) // 90.0, dtype=np.int64)


def side_lit(image: np.ndarray, box: np.ndarray, side: str) -> np.ndarray:
    """`image` (RGB uint8) under a hard key light from `side` ("left"/"right" of the image) over the face's
    `box` (x0, y0, x1, y1): the lit side at full strength, a terminator 6 % of the face wide at its middle,
    the far side at 30 %, a warm tint on the lit side and a specular spot on the lit cheek."""
    x0, y0, x1, y1 = (float(v) for v in box[:4])
    fw = x1 - x0
    h, w = image.shape[:2]
    xs = np.arange(w, dtype=np.float32)[None, :]
    ys = np.arange(h, dtype=np.float32)[:, None]
    sign = -1.0 if side == "left" else 1.0
    lit = 1.0 / (1.0 + np.exp(-sign * (xs - (x0 + x1) / 2) / (0.06 * fw)))  # (1, w)
    light = (0.3 + 0.9 * lit)[:, :, None] * np.array([1.0, 0.93, 0.8], np.float32) ** lit[:, :, None]
    cx = (x0 + x1) / 2 + (-0.22 if side == "left" else 0.22) * fw
    cy = y0 + 0.52 * (y1 - y0)
    spot = np.exp(-((xs - cx) ** 2 + (ys - cy) ** 2) / (2 * (0.06 * fw) ** 2))[:, :, None]
    linear = (image.astype(np.float32) / 255.0) ** 2.2 * light + 0.55 * spot
    return np.asarray(np.clip(linear ** (1 / 2.2) * 255.0 + 0.5, 0, 255), np.uint8)


def light_sources(
    held: Mapping[str, np.ndarray], mesh: Mesh, prepare: Callable[[np.ndarray, str], SourceFace]
) -> dict[str, tuple[np.ndarray, SourceFace]]:
    """The new pairs' sources: biden as photographed, obama2 and biden relit from one side."""
    out: dict[str, tuple[np.ndarray, SourceFace]] = {}
    for name, _, side in LIGHT_PAIRS:
        base = held[name.split(" ")[0]]
        image = base
        if side is not None:
            face = mesh(base)
            if face is None:
                continue
            image = side_lit(base, face.box, side)
        out[name] = (image, prepare(image, name))
    return out


def _lab(rgb: np.ndarray) -> np.ndarray:
    return np.asarray(cv2.cvtColor(rgb.astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB))


def _luma(rgb: np.ndarray) -> np.ndarray:
    return np.asarray(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), np.float32)


def _rings(shape: tuple[int, int], landmarks: np.ndarray, rings: Sequence[Sequence[int]]) -> np.ndarray:
    out = np.zeros(shape, np.uint8)
    cv2.fillPoly(out, [np.round(landmarks[list(r)]).astype(np.int32) for r in rings], 255)
    return out


def regions(shape: tuple[int, int], landmarks: np.ndarray) -> dict[str, np.ndarray]:
    """Boolean masks: the lids (a band around each eye opening), the brows, and the cheeks' skin."""
    size = face_size_of(landmarks)
    eyes = _rings(shape, landmarks, (EYE_RIGHT, EYE_LEFT))
    grow = max(1, int(round(size * LID_GROW)))
    grown = cv2.dilate(eyes, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1,) * 2))
    brows = _rings(shape, landmarks, (BROW_RIGHT, BROW_LEFT)) > 0
    skin = skin_weight(shape, landmarks, size)
    ys = np.arange(shape[0])[:, None]
    nose_y = float(landmarks[1, 1])  # the nose tip: cheeks are skin between the eyes' and the mouth's height
    eye_y, mouth_y = float(landmarks[[33, 263], 1].mean()), float(landmarks[[61, 291], 1].mean())
    cheeks = skin & (ys > (eye_y + nose_y) / 2) & (ys < mouth_y)
    return {"lids": (grown > 0) & (eyes == 0) & ~brows, "brows": brows, "cheeks": cheeks}


def relative_chroma(image: np.ndarray, masks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    lab = _lab(image)
    cheek = lab[masks["cheeks"]][:, 1:].mean(0)
    return {k: lab[masks[k]][:, 1:].mean(0) - cheek for k in ("lids", "brows")}


def low_pass(luma: np.ndarray, weight: np.ndarray, sigma: float) -> np.ndarray:
    w = weight.astype(np.float32)
    return np.asarray(
        cv2.GaussianBlur(luma * w, (0, 0), sigma) / np.maximum(cv2.GaussianBlur(w, (0, 0), sigma), 1e-3)
    )


def measure(
    frame: np.ndarray, landmarks: np.ndarray, source: SourceFace, source_image: np.ndarray, src_mesh: Face
) -> dict[str, Any] | None:
    """The case's seam, shading and lid/brow measures at the default (the source's shape, mouth and eyes
    kept), on `frame` with the target's mesh `landmarks`."""
    mesh = mesh_of(source)
    if mesh.shape is None:
        return None
    plan = plan_warp(frame.shape[:2], landmarks, shape_offset(mesh.shape, landmarks), FACE_SHAPE)
    if plan is None:
        return None
    x0, y0, x1, y1 = plan.window
    moved = held_remap(frame, plan, landmarks)
    local = plan.landmarks - np.array((x0, y0), np.float32)
    patch = MeshWarpSwapper().face_patch(moved, local, mesh, KEPT_REGIONS)
    if patch is None:
        return None
    out = moved.copy()
    paste_back(out, patch)
    # where the patch sits inside the moved window
    px0, py0 = -int(round(float(patch.matrix[0, 2]))), -int(round(float(patch.matrix[1, 2])))
    ph, pw = patch.mask.shape
    full = np.zeros(moved.shape[:2], np.float32)
    full[py0 : py0 + ph, px0 : px0 + pw] = patch.mask
    result: dict[str, Any] = {}
    # seam: gradient across the band, along the mask's own gradient
    mgx, mgy = cv2.Sobel(full, cv2.CV_32F, 1, 0), cv2.Sobel(full, cv2.CV_32F, 0, 1)
    norm = np.hypot(mgx, mgy)
    band = (full > 0.2) & (full < 0.8) & (norm > 1e-6)
    size = face_size_of(local)
    # the kept mouth's and eyes' edges (where the face meets the target's lips and eyes, not its skin)
    kept = region_mask(moved.shape[:2], local, KEPT_REGIONS, size) > 0.02
    kept = cv2.dilate(kept.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    nx, ny = mgx[band] / norm[band], mgy[band] / norm[band]

    def across(img: np.ndarray) -> np.ndarray:  # each band pixel's luminance gradient across the band
        g = _luma(img)
        gx, gy = cv2.Sobel(g, cv2.CV_32F, 1, 0), cv2.Sobel(g, cv2.CV_32F, 0, 1)
        return np.asarray(gx[band] * nx + gy[band] * ny)

    a_out, a_moved, kept_band = across(out), across(moved), kept[band]

    def ratio(where: np.ndarray) -> float | None:
        if where.sum() < 16:
            return None
        rms_out, rms_moved = (float(np.sqrt(np.mean(a[where] ** 2))) for a in (a_out, a_moved))
        return round(rms_out / max(rms_moved, 1e-6), 3)

    for key, where in (
        ("seam", np.ones_like(kept_band)),
        ("seam_outline", ~kept_band),
        ("seam_kept", kept_band),
    ):
        if (r := ratio(where)) is not None:
            result[key] = r
    # where along the outline: its band by side of the face's centre (upright in the picture)
    ys, xs = np.nonzero(band)
    centre = local.mean(0) + (px0, py0)
    side = side_of(np.degrees(np.arctan2(ys - centre[1], xs - centre[0])))
    sides = {name: r for k, name in enumerate(SIDES) if (r := ratio(~kept_band & (side == k))) is not None}
    if sides:
        result["seam_outline_sides"] = sides
    # shading: low-passed skin luminance where the face was pasted at full strength
    skin = skin_weight(moved.shape[:2], local, size) & (full > 0.8)
    if skin.sum() >= 64:
        sigma = max(1.0, size * SHADING_SIGMA)
        lo, lt = low_pass(_luma(out), skin, sigma)[skin], low_pass(_luma(moved), skin, sigma)[skin]
        result["shading_mad"] = round(float(np.abs(lo - lt).mean()), 2)
        result["shading_corr"] = round(float(np.corrcoef(lo, lt)[0, 1]), 3)
    # lids and brows: chroma relative to the cheeks, output against the source photo's
    if src_mesh.landmarks is not None:
        got = relative_chroma(out, regions(moved.shape[:2], local))
        own = relative_chroma(source_image, regions(source_image.shape[:2], src_mesh.landmarks))
        for k in ("lids", "brows"):
            result[f"{k}_shift"] = round(float(np.linalg.norm(got[k] - own[k])), 2)
    return result


def light_cases(
    mesh: Mesh,
    sources: Mapping[str, tuple[np.ndarray, SourceFace]],
    targets: Mapping[str, np.ndarray],
    pairs: Sequence[tuple[str, str]],
) -> dict[str, Any]:
    """{"source -> target": measures} for every pair (see the module's doc)."""
    out: dict[str, Any] = {}
    src_meshes = {name: mesh(image) for name, (image, _) in sources.items()}
    for sname, tname in pairs:
        face, src_face = mesh(targets[tname]), src_meshes[sname]
        if face is None or face.landmarks is None or src_face is None:
            continue
        cell = measure(targets[tname], face.landmarks, sources[sname][1], sources[sname][0], src_face)
        if cell is not None:
            out[f"{sname} -> {tname}"] = cell
    return out


def light_summary(cases: Mapping[str, Any]) -> dict[str, Any]:
    """Means and worst cases of each measure."""
    out: dict[str, Any] = {}
    for key in (
        "seam",
        "seam_outline",
        "seam_kept",
        "shading_mad",
        "shading_corr",
        "lids_shift",
        "brows_shift",
    ):
        vals = [c[key] for c in cases.values() if key in c]
        if vals:
            worst = min(vals) if key == "shading_corr" else max(vals)
            out[key] = {"mean": round(float(np.mean(vals)), 3), "worst": worst}
    return out
