"""The quality report's identity and liveliness sections: which kept regions hand the face back.

For every (source, target) case and kept-regions setting: the swapped face's centred cosine to the source and
to the target (bench.quality.identity). On the talking clip, per setting: the target's eye and mouth openness
series against the output's (both from FaceMesh), as correlations, and the identity over the clip. The swap
and the mesh come in as callables (the report's `Study`), so this module runs no pipeline of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from bench.quality.identity import FaceRecognizer, appearance, centred_cosine, correlation, openness
from engines.frames import KEPT_REGIONS
from engines.processors.face_detector import Face

# The settings compared: label -> kept regions.
SETTINGS: dict[str, tuple[str, ...]] = {
    "none": (),
    "mouth": ("mouth",),
    "mouth,eye_area": ("mouth", "eye_area"),
    "mouth,eyes": ("mouth", "eyes"),
}
DEFAULT = ",".join(KEPT_REGIONS)
MARGIN_TARGET = 0.1  # cosine to source must beat cosine to target by this much

Swap = Callable[[np.ndarray, Any, tuple[str, ...]], tuple[np.ndarray, Face | None]]
Mesh = Callable[[np.ndarray], Face | None]


def reference_mean(
    recognizer: FaceRecognizer, faces: Sequence[tuple[np.ndarray, np.ndarray | None]]
) -> tuple[np.ndarray, dict[str, float]]:
    """The mean descriptor of distinct people's faces, and how strangers score once it is removed."""
    embs = [e for e in (recognizer.embed(img, box) for img, box in faces) if e is not None]
    if len(embs) < 3:
        raise ValueError("the identity reference needs at least three faces")
    mean = np.mean(embs, axis=0)
    pairs = [centred_cosine(a, b, mean) for i, a in enumerate(embs) for b in embs[i + 1 :]]
    return mean, {
        "faces": len(embs),
        "strangers_mean": round(float(np.mean(pairs)), 3),
        "strangers_max": round(float(np.max(pairs)), 3),
    }


def score(
    recognizer: FaceRecognizer,
    mean: np.ndarray,
    image: np.ndarray,
    face: Face | None,
    source: np.ndarray,
    target: np.ndarray,
) -> dict[str, float] | None:
    e = recognizer.embed(image, face.box if face is not None else None)
    if e is None:
        return None
    s, t = centred_cosine(e, source, mean), centred_cosine(e, target, mean)
    return {"cos_source": round(s, 3), "cos_target": round(t, 3), "margin": round(s - t, 3)}


def identity_cases(
    recognizer: FaceRecognizer,
    mean: np.ndarray,
    swap: Swap,
    sources: Mapping[str, tuple[np.ndarray, Any]],
    targets: Mapping[str, np.ndarray],
    pairs: Sequence[tuple[str, str]],
    tiles: Callable[[str, str, np.ndarray, Face], None] | None = None,
) -> dict[str, Any]:
    """{"source -> target": {setting: score}} for each (source, target) name pair; `tiles(case, setting,
    output, face)` sees each output (the contact sheet)."""
    out: dict[str, Any] = {}
    s_embs = {name: recognizer.embed(image) for name, (image, _) in sources.items()}
    t_embs = {name: recognizer.embed(image) for name, image in targets.items()}
    for sname, tname in pairs:
        prepared = sources[sname][1]
        timage = targets[tname]
        s_emb, t_emb = s_embs[sname], t_embs[tname]
        case = f"{sname} -> {tname}"
        if s_emb is None or t_emb is None:
            out[case] = {"error": "no face for the identity measure in the source or the target"}
            continue
        cell: dict[str, Any] = {}
        for label, keep in SETTINGS.items():
            result, face = swap(timage, prepared, keep)
            if face is None:
                cell[label] = {"error": "no face swapped"}
                continue
            cell[label] = score(recognizer, mean, result, face, s_emb, t_emb) or {"error": "no face found"}
            if tiles is not None:
                tiles(case, label, result, face)
        out[case] = cell
    return out


def verdict(cases: Mapping[str, Any], setting: str = DEFAULT) -> dict[str, Any]:
    """Whether `setting` meets cosine-to-source > cosine-to-target + MARGIN_TARGET, case by case."""
    margins = {
        case: cell[setting]["margin"]
        for case, cell in cases.items()
        if isinstance(cell.get(setting), dict) and "margin" in cell[setting]
    }
    failed = sorted(case for case, m in margins.items() if m <= MARGIN_TARGET)
    return {
        "setting": setting,
        "target_margin": MARGIN_TARGET,
        "cases": len(margins),
        "failed": failed,
        "min_margin": round(min(margins.values()), 3) if margins else None,
    }


def liveliness(
    recognizer: FaceRecognizer,
    mean: np.ndarray,
    frames: Sequence[np.ndarray],
    run_clip: Callable[[tuple[str, ...]], list[tuple[np.ndarray, Face | None]]],
    mesh: Mesh,
    source: np.ndarray,
    every: int = 15,
    settings: Mapping[str, tuple[str, ...]] = SETTINGS,
) -> dict[str, Any]:
    """Per setting (kept regions), over the clip: correlation of the target's and the output's eye / mouth
    openness (landmarks) and of what shows inside the target's openings (appearance), and the identity
    (centred cosine to source / target, mean over every `every`-th frame); `brows_openness_correlation`:
    the brows' height above the eyes (their raises)."""
    meshes = [mesh(frame) for frame in frames]
    target_lm = [f.landmarks if f is not None else None for f in meshes]
    out: dict[str, Any] = {"frames": len(frames)}
    target_embs: dict[int, np.ndarray | None] = {}
    for label, keep in settings.items():
        outputs = run_clip(keep)
        geo: list[tuple[dict[str, float], dict[str, float]]] = []
        look: list[tuple[dict[str, float], dict[str, float]]] = []
        ids: list[dict[str, float]] = []
        for k, (image, face) in enumerate(outputs):
            lm = target_lm[k]
            if lm is None:
                continue
            look.append((appearance(frames[k], lm), appearance(image, lm)))
            got = mesh(image)
            if got is not None and got.landmarks is not None:
                geo.append((openness(lm), openness(got.landmarks)))
            if k % every == 0 and face is not None:
                if k not in target_embs:
                    target_embs[k] = recognizer.embed(frames[k], face.box)
                t_emb = target_embs[k]
                s = score(recognizer, mean, image, face, source, t_emb) if t_emb is not None else None
                if s is not None:
                    ids.append(s)
        cell: dict[str, Any] = {"frames_measured": len(look)}
        for kind, series, parts in (
            ("openness", geo, ("eyes", "mouth", "brows")),
            ("appearance", look, ("eyes", "mouth")),
        ):
            for part in parts:
                c = correlation([a[part] for a, _ in series], [b[part] for _, b in series])
                cell[f"{part}_{kind}_correlation"] = round(c, 3) if c is not None else None
        if ids:
            cell["identity_mean"] = {
                key: round(float(np.mean([i[key] for i in ids])), 3)
                for key in ("cos_source", "cos_target", "margin")
            }
        out[label] = cell
    return out
