"""The quality report's face-shape section: how much of the source's shape the swap takes, and at what cost.

For every (source, target) case, with the default kept regions: the identity (bench.quality.identity) with the
target's shape (`shape` 0), the source's (the default, 1), and a control with the *wrong* source's shape
(the source's pixels on another person's shape: if that scores as well, the gain is not the source's shape).
On the talking clip: the swapped geometry's jitter against the tracked mesh's (acceleration, per mille of the
face size), how often a fold was refused (alpha scaled back) and whether any map still folds (its pixel
map's Jacobian determinant, measured independently of the warp's own check). The cost per face: the swap
with and without the shape, timed alternately. The swap and the mesh come in as callables, as in
bench.quality.identity_section.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from bench.quality.identity import FaceRecognizer
from bench.quality.identity_section import MARGIN_TARGET, score
from engines.frames import FACE_SHAPE, KEPT_REGIONS, SourceFace
from engines.processors.face_detector import Face
from engines.processors.face_shape import plan_warp, shape_offset
from engines.processors.mesh_warp import MeshWarpSwapper
from engines.processors.mouth_hold import held_pixel_map
from engines.processors.paste import paste_back
from engines.source.mesh import MeshSource
from engines.source.prepared import mesh_of as prepared_mesh
from engines.source.prepared import prepared_of
from loadgen.percentiles import percentile

COLUMNS = ("target_shape", "source_shape", "wrong_shape")
SHAPES = {"target_shape": 0.0, "source_shape": FACE_SHAPE, "wrong_shape": FACE_SHAPE}

ShapeSwap = Callable[[np.ndarray, Any, tuple[str, ...], float], tuple[np.ndarray, Face | None]]


def mesh_of(source: SourceFace) -> MeshSource:
    return prepared_mesh(source)


def with_shape_of(source: SourceFace, other: SourceFace) -> SourceFace:
    """`source`'s pixels, mesh and validity with `other`'s 3-D shape: the wrong-shape control."""
    mesh = replace(mesh_of(source), shape=mesh_of(other).shape)
    prepared = replace(prepared_of(source), mesh=mesh)
    return SourceFace(
        id=f"{source.id} with {other.id}'s shape", image=source.image, faces=source.faces, prepared=prepared
    )


def shape_cases(
    recognizer: FaceRecognizer,
    mean: np.ndarray,
    swap: ShapeSwap,
    sources: Mapping[str, tuple[np.ndarray, SourceFace]],
    controls: Mapping[str, SourceFace],
    targets: Mapping[str, np.ndarray],
    pairs: Sequence[tuple[str, str]],
    tiles: Callable[[str, str, np.ndarray, Face], None] | None = None,
) -> dict[str, Any]:
    """{"source -> target": {column: score}}: the default kept regions with the target's shape, the
    source's, and the source's pixels on `controls[source]` (another person's shape)."""
    out: dict[str, Any] = {}
    s_embs = {name: recognizer.embed(image) for name, (image, _) in sources.items()}
    t_embs = {name: recognizer.embed(image) for name, image in targets.items()}
    for sname, tname in pairs:
        case = f"{sname} -> {tname}"
        s_emb, t_emb = s_embs[sname], t_embs[tname]
        if s_emb is None or t_emb is None:
            out[case] = {"error": "no face for the identity measure in the source or the target"}
            continue
        cell: dict[str, Any] = {}
        for column in COLUMNS:
            prepared = controls[sname] if column == "wrong_shape" else sources[sname][1]
            result, face = swap(targets[tname], prepared, KEPT_REGIONS, SHAPES[column])
            if face is None:
                cell[column] = {"error": "no face swapped"}
                continue
            cell[column] = score(recognizer, mean, result, face, s_emb, t_emb) or {"error": "no face found"}
            if tiles is not None:
                tiles(case, column, result, face)
        out[case] = cell
    return out


def summary(cases: Mapping[str, Any]) -> dict[str, Any]:
    """Per column: the mean margin, how many cases pass MARGIN_TARGET, the smallest margin."""
    out: dict[str, Any] = {"target_margin": MARGIN_TARGET}
    for column in COLUMNS:
        margins = [
            cell[column]["margin"]
            for cell in cases.values()
            if isinstance(cell.get(column), dict) and "margin" in cell[column]
        ]
        if margins:
            out[column] = {
                "mean_margin": round(float(np.mean(margins)), 3),
                "passed": sum(m > MARGIN_TARGET for m in margins),
                "cases": len(margins),
                "min_margin": round(min(margins), 3),
            }
    return out


def map_folds(plan_maps: tuple[np.ndarray, np.ndarray]) -> int:
    """Pixels where the map's Jacobian determinant (central differences) is not positive."""
    map_x, map_y = plan_maps
    det = np.gradient(map_x, axis=1) * np.gradient(map_y, axis=0) - np.gradient(map_x, axis=0) * np.gradient(
        map_y, axis=1
    )
    return int((det <= 0).sum())


def geometry(
    outputs: Sequence[tuple[np.ndarray, Face | None]],
    frames: Sequence[np.ndarray],
    source: SourceFace,
    measure: Callable[[list[np.ndarray], float], float],
) -> dict[str, Any]:
    """Over a clip's tracked faces (`outputs`' faces on `frames`): the tracked mesh's and the swapped
    geometry's jitter (`measure`, e.g. mean acceleration per mille of the face size), refused folds and
    folded pixel maps."""
    shape = mesh_of(source).shape
    if shape is None:
        raise ValueError("the source has no 3-D shape")
    tracked, swapped = [], []
    scaled_back = folded = frames_warped = 0
    min_det = float("inf")
    for (_, face), frame in zip(outputs, frames, strict=True):
        if face is None or face.landmarks is None:
            continue
        target = face.landmarks
        plan = plan_warp(frame.shape[:2], target, shape_offset(shape, target), FACE_SHAPE)
        tracked.append(target)
        swapped.append(plan.landmarks if plan is not None else target)
        if plan is None:
            continue
        frames_warped += 1
        scaled_back += plan.refused > 0
        min_det = min(min_det, plan.min_det)
        held = held_pixel_map(plan, target)
        folded += map_folds((held[..., 0], held[..., 1])) > 0
    size = float(np.ptp(np.asarray(tracked[0]), axis=0).max())
    return {
        "frames": len(tracked),
        "frames_warped": frames_warped,
        "jitter": {
            "tracked_mesh": measure(tracked, size),
            "swapped_geometry": measure(swapped, size),
            "unit": "per mille of face size per frame (acceleration)",
        },
        "folds": {
            "scaled_back": scaled_back,
            "folded_maps": folded,
            "min_jacobian": round(min_det, 3) if frames_warped else None,
        },
    }


def swap_cost(
    frames: Sequence[tuple[np.ndarray, np.ndarray]], source: SourceFace, rounds: int = 15
) -> dict[str, Any]:
    """Per face, ms (median): mesh_warp's swap_one and paste with the target's shape and with the source's
    (the default strength), timed alternately over `frames` ((frame, target landmarks)), `rounds` times each:
    wall time, and the process's CPU time (every thread's; on a busy box wall time also counts waiting)."""
    swapper = MeshWarpSwapper()
    mesh = mesh_of(source)
    wall: dict[str, list[float]] = {"shape_0": [], "shape_1": []}
    cpu: dict[str, list[float]] = {"shape_0": [], "shape_1": []}
    for _ in range(rounds):
        for frame, target in frames:
            for label, alpha in (("shape_0", 0.0), ("shape_1", FACE_SHAPE)):
                work = frame.copy()
                t0, c0 = time.perf_counter(), time.process_time()
                patch = swapper.swap_one(frame, target, mesh, KEPT_REGIONS, alpha)
                if patch is not None:
                    paste_back(work, patch)
                cpu[label].append((time.process_time() - c0) * 1000)
                wall[label].append((time.perf_counter() - t0) * 1000)
    out: dict[str, Any] = {"faces": len(frames), "rounds": rounds}
    for kind, series in (("wall", wall), ("cpu", cpu)):
        s0, s1 = percentile(series["shape_0"], 50), percentile(series["shape_1"], 50)
        out[kind] = {"shape_0_ms": round(s0, 3), "shape_1_ms": round(s1, 3), "added_ms": round(s1 - s0, 3)}
    return out
