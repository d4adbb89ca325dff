"""The quality report: who is swapped onto whom, every section measured in one fixed order, the contact sheet.

The order of the pipeline calls is part of the result (the tracked pipeline keeps state between calls), so
`run` keeps one sequence: the cast, the kept regions, the identity and shape sections with their liveliness
on the talking clip, the contact sheet, the masks and costs, then the jitter and seam measures on pipelines
of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from bench.quality.expression_section import clip_mouth, expression_cases
from bench.quality.expression_section import verdict as expression_verdict
from bench.quality.identity import FaceRecognizer
from bench.quality.identity_section import (
    DEFAULT,
    SETTINGS,
    identity_cases,
    liveliness,
    reference_mean,
    verdict,
)
from bench.quality.light_section import LIGHT_PAIRS, light_cases, light_sources, light_summary
from bench.quality.measures import (
    acceleration,
    costs,
    jitter_still,
    mask_shares,
    mouth_and_eyes,
    open_mouth_frames,
    seams,
    trajectories,
)
from bench.quality.shape_section import COLUMNS, shape_cases, summary, swap_cost, with_shape_of
from bench.quality.shape_section import geometry as shape_geometry_of
from bench.quality.study import (
    KEPT,
    Study,
    clip_frames,
    clip_outputs,
    embed_source,
    face_crop,
    face_of,
    held_out,
    read_rgb,
)
from engines.frames import FACE_SHAPE, SourceFace
from engines.models.store import ModelStore
from engines.processors.face_detector import Face
from engines.source.prepared import prepared_of
from loadgen.contact_sheet import caption, contact_sheet, crop_face
from loadgen.media import media_path

HELD_OUT = ("obama", "obama2", "biden")  # faces no test or tuning of the swap was written against
# A closed-mouth source on the smiling and laughing targets, chosen before the expression split was tuned
EXPRESSION_SOURCE = "biden"
EXPRESSION_TARGETS = ("astronaut", "obama", "t1 laughing")
SHEET_COLUMNS = (
    "target",
    "before: target's shape",
    "after: source's (default)",
    "another's shape (control)",
    "default, Poisson",
)
Pair = tuple[str, str]


@dataclass
class Cast:
    """The report's pictures and people: the source, the targets of the kept-regions section, the identity
    pairs (with the held-out faces and the group photo's other people) and the wrong-shape controls."""

    astronaut: np.ndarray
    group: np.ndarray
    carphone: list[np.ndarray]
    fps: float
    faces: list[Face] = field(default_factory=list)
    held: dict[str, np.ndarray] = field(default_factory=dict)
    source_image: np.ndarray | None = None
    source: SourceFace | None = None
    targets: dict[str, np.ndarray] = field(default_factory=dict)
    all_targets: dict[str, np.ndarray] = field(default_factory=dict)
    sources: dict[str, tuple[np.ndarray, SourceFace]] = field(default_factory=dict)
    controls: dict[str, SourceFace] = field(default_factory=dict)
    pairs: list[Pair] = field(default_factory=list)
    new_pairs: list[Pair] = field(default_factory=list)
    expression_pairs: list[Pair] = field(default_factory=list)
    light_pairs: list[Pair] = field(default_factory=list)


def read_cast(media_root: Path) -> Cast:
    return Cast(
        astronaut=read_rgb(media_path(media_root, "astronaut.png")),
        group=read_rgb(media_path(media_root, "t1.jpg")),
        carphone=clip_frames(media_path(media_root, "carphone_pristine.mp4"), (352, 288)),
        fps=30000 / 1001,
    )


def choose_targets(study: Study, cast: Cast, media_root: Path) -> tuple[Face, Face]:
    """The source (the group photo's leftmost face) and the kept-regions targets; returns the source's face
    and the group's laughing man (both stay out of the identity section's "others")."""
    cast.held = {n: held_out(study, read_rgb(media_path(media_root, f"{n}.jpg"))) for n in HELD_OUT}
    cast.faces = faces = study.pipeline.detect([cast.group])[0]
    group = cast.group
    left = min(faces, key=lambda f: f.box[0])  # closed mouth, looking at the camera
    x1, y1, x2, y2 = left.box.astype(int)
    cast.source_image = np.ascontiguousarray(group[max(y1 - 60, 0) : y2 + 60, max(x1 - 60, 0) : x2 + 60])
    cast.source = study.pipeline.prepare_source(cast.source_image, "t1-left")
    laughing = max(faces, key=lambda f: f.box[1])  # the laughing man at the table, teeth showing
    lx1, ly1, lx2, ly2 = laughing.box.astype(int)
    pad = int(0.6 * (lx2 - lx1))
    group_target = np.ascontiguousarray(group[max(ly1 - pad, 0) : ly2 + pad, max(lx1 - pad, 0) : lx2 + pad])
    picked = open_mouth_frames(study, cast.carphone)
    cast.targets = {"astronaut": cast.astronaut, "t1 laughing": group_target}
    cast.targets.update({f"carphone #{k}": cast.carphone[k] for k in picked})
    return left, laughing


def choose_pairs(study: Study, cast: Cast, left: Face, laughing: Face) -> None:
    """Identity: the report's source on every target, a held-out source on every other person, and the
    group photo's four other people, each the source on the next (unseen by every choice made)."""
    assert cast.source_image is not None and cast.source is not None
    others = {
        f"t1 #{k + 1}": face_crop(cast.group, f.box)
        for k, f in enumerate(
            sorted((f for f in cast.faces if f is not left and f is not laughing), key=lambda f: f.box[0])
        )
    }
    held = cast.held
    cast.all_targets = {**cast.targets, "biden": held["biden"], "obama": held["obama"], **others}
    cast.sources = {
        "t1 left": (cast.source_image, cast.source),
        "obama2": (held["obama2"], study.pipeline.prepare_source(held["obama2"], "obama2")),
    }
    cast.sources.update({n: (img, study.pipeline.prepare_source(img, n)) for n, img in others.items()})
    cast.pairs = [("t1 left", t) for t in cast.all_targets if t not in others]
    cast.pairs += [("obama2", t) for t in cast.all_targets if t != "obama" and t not in others]
    unseen = list(others)
    cast.new_pairs = [(unseen[k], unseen[(k + 1) % len(unseen)]) for k in range(len(unseen))]
    cast.pairs += cast.new_pairs
    # the wrong-shape control: each source's pixels on another source's shape
    names = list(cast.sources)
    cast.controls = {
        name: with_shape_of(cast.sources[name][1], cast.sources[names[(k + 1) % len(names)]][1])
        for k, name in enumerate(names)
    }
    # the expression pairs' source joins after the controls above are drawn (they stay as they were); its
    # own control is the report's source's shape
    image = held[EXPRESSION_SOURCE]
    cast.sources[EXPRESSION_SOURCE] = (image, study.pipeline.prepare_source(image, EXPRESSION_SOURCE))
    cast.controls[EXPRESSION_SOURCE] = with_shape_of(cast.sources[EXPRESSION_SOURCE][1], cast.source)
    cast.expression_pairs = [(EXPRESSION_SOURCE, t) for t in EXPRESSION_TARGETS]
    cast.pairs += cast.expression_pairs


def choose_light_pairs(study: Study, cast: Cast) -> None:
    """The light section's pairs (chosen before the light was tuned): biden's photo on obama2, and two
    sources relit by a hard side light; each source's wrong-shape control is the next one's shape."""
    light = light_sources(cast.held, study.mesh, study.pipeline.prepare_source)
    # a source the expression pairs already prepared keeps its preparation and its control
    for name, prepared in light.items():
        cast.sources.setdefault(name, prepared)
    cast.all_targets.setdefault("obama2", cast.held["obama2"])
    cast.light_pairs = [(s, t) for s, t, _ in LIGHT_PAIRS if s in light]
    cast.pairs += cast.light_pairs
    names = list(light)
    for k, name in enumerate(names):
        cast.controls.setdefault(name, with_shape_of(light[name][1], light[names[(k + 1) % len(names)]][1]))


@dataclass
class Sections:
    """The identity, shape and liveliness sections, and the crops the contact sheet shows."""

    population: dict[str, float]
    cases: dict[str, Any]
    by_shape: dict[str, Any]
    clip: dict[str, Any]
    clip_flat: dict[str, Any]
    shape_geometry: dict[str, Any]
    crops: dict[str, dict[str, np.ndarray]]
    expression: dict[str, Any] = field(default_factory=dict)


def measure_sections(study: Study, recognizer: FaceRecognizer, cast: Cast) -> Sections:
    assert cast.source_image is not None and cast.source is not None
    source, carphone, fps = cast.source, cast.carphone, cast.fps
    held = cast.held
    mean, population = reference_mean(
        recognizer,
        [(cast.group, f.box) for f in cast.faces]
        + [(cast.astronaut, None), (carphone[0], None), (held["obama"], None), (held["biden"], None)],
    )
    crops: dict[str, dict[str, np.ndarray]] = {}

    def keep_tile(case: str, label: str, result: np.ndarray, face: Face) -> None:
        crops.setdefault(case, {})[label] = crop_face(result, face)

    cases = identity_cases(recognizer, mean, study.swap, cast.sources, cast.all_targets, cast.pairs)
    by_shape = shape_cases(
        recognizer, mean, study.swap, cast.sources, cast.controls, cast.all_targets, cast.pairs, keep_tile
    )
    source_emb = embed_source(recognizer, cast.source_image)
    clip = liveliness(
        recognizer,
        mean,
        carphone,
        lambda keep: clip_outputs(study, carphone, source, keep, fps),
        study.mesh,
        source_emb,
    )
    clip_flat = liveliness(
        recognizer,
        mean,
        carphone,
        lambda keep: clip_outputs(study, carphone, source, keep, fps, shape=0.0),
        study.mesh,
        source_emb,
        settings={DEFAULT: KEPT},
    )
    outputs = clip_outputs(study, carphone, source, KEPT, fps)
    shape_geometry = shape_geometry_of(outputs, carphone, source, acceleration)
    expression = {
        "cases": expression_cases(study.swap, study.mesh, cast.sources, cast.all_targets, cast.pairs),
        "carphone_mouth_width": {
            "default": clip_mouth(outputs, carphone, study.mesh),
            "shape_0": clip_mouth(
                clip_outputs(study, carphone, source, KEPT, fps, shape=0.0), carphone, study.mesh
            ),
        },
    }
    expression["verdict"] = expression_verdict(expression["cases"])
    return Sections(population, cases, by_shape, clip, clip_flat, shape_geometry, crops, expression)


def sheet_rows(
    study: Study, poisson: Study, cast: Cast, sections: Sections
) -> dict[str, tuple[np.ndarray, list[np.ndarray]]]:
    """One contact-sheet row per identity pair: the target, each shape column, the Poisson blend."""
    rows: dict[str, tuple[np.ndarray, list[np.ndarray]]] = {}
    crops = sections.crops
    source_tiles = {name: crop_face(img, face_of(study, img)) for name, (img, _) in cast.sources.items()}
    psources = {name: poisson.pipeline.prepare_source(img, name) for name, (img, _) in cast.sources.items()}
    for sname, tname in cast.pairs:
        case = f"{sname} -> {tname}"
        cell = sections.by_shape.get(case, {})
        timage = cast.all_targets[tname]
        tface = face_of(study, timage)
        if case not in crops or any(lab not in crops[case] for lab in COLUMNS) or tface is None:
            continue
        presult, pface = poisson.swap(timage, psources[sname], KEPT)
        tiles = [caption(crop_face(timage, tface), tname)]
        for label in COLUMNS:
            sc = cell.get(label, {})
            text = f"src {sc['cos_source']:.2f} tgt {sc['cos_target']:.2f}" if "margin" in sc else "-"
            tiles.append(caption(crops[case][label], text))
        ptile = crop_face(presult, pface) if pface is not None else np.zeros_like(tiles[0][:-20])
        tiles.append(caption(ptile, "Poisson blend"))
        rows[case] = (caption(source_tiles[sname], sname), tiles)
    return rows


def cost_per_face(study: Study, cast: Cast) -> dict[str, Any]:
    astronaut, carphone = cast.astronaut, cast.carphone
    assert cast.source is not None
    small = cv2.resize(astronaut, (320, 320))[40:280]
    broadcast = np.zeros((360, 640, 3), np.uint8)
    broadcast[:, 140:500] = cv2.resize(astronaut, (360, 360), interpolation=cv2.INTER_AREA)
    cost: dict[str, Any] = {"320x240": costs(study, small), "640x360": costs(study, broadcast)}
    wide = [cv2.resize(carphone[k], (640, 360), interpolation=cv2.INTER_CUBIC) for k in (0, 40, 80)]
    timed_faces = [
        (img, face.landmarks)
        for img in (broadcast, *wide)
        if (face := study.mesh(img)) is not None and face.landmarks is not None
    ]
    cost["640x360_swap"] = swap_cost(timed_faces, cast.source)
    return cost


def _only(cases: dict[str, Any], pairs: list[Pair]) -> dict[str, Any]:
    return {f"{s} -> {t}": cases[f"{s} -> {t}"] for s, t in pairs if f"{s} -> {t}" in cases}


def identity_json(cast: Cast, sections: Sections) -> dict[str, Any]:
    cases = sections.cases
    return {
        "model": "dlib_face_recognition_resnet_model_v1 (dlib 20, CC0 / public domain; PyPI "
        "face-recognition-models 0.3.0), dlib HOG detector + 5-point aligner",
        "cosine": "centred: descriptors minus the reference faces' mean (1 = same face, ~0 = strangers)",
        "reference": sections.population,
        "settings": {label: list(keep) for label, keep in SETTINGS.items()},
        "cases": cases,
        "default": verdict(cases),
        "new_pairs": [f"{s} -> {t}" for s, t in cast.new_pairs],
        "default_on_new_pairs": verdict(_only(cases, cast.new_pairs)),
    }


def shape_json(cast: Cast, sections: Sections) -> dict[str, Any]:
    by_shape = sections.by_shape
    return {
        "default": FACE_SHAPE,
        "columns": {
            "target_shape": "shape 0: the target's face shape",
            "source_shape": "shape 1 (the default): the source's",
            "wrong_shape": "shape 1 with another source's 3-D shape (control)",
        },
        "kept_regions": list(KEPT),
        "cases": by_shape,
        "summary": summary(by_shape),
        "summary_new_pairs": summary(_only(by_shape, cast.new_pairs)),
        "summary_report_cases": summary(
            _only(by_shape, [p for p in cast.pairs if p not in cast.new_pairs + cast.expression_pairs])
        ),
        "summary_expression_pairs": summary(_only(by_shape, cast.expression_pairs)),
        "carphone": sections.shape_geometry,
        "liveliness_carphone_shape_0": sections.clip_flat,
    }


def light_json(cast: Cast, sections: Sections, light: dict[str, Any]) -> dict[str, Any]:
    return {
        "measures": {
            "seam": "RMS luminance gradient across the blend's edge band, output / target (1 = none added)",
            "shading_mad": "skin's low-passed luminance, mean |output - target| (grey levels)",
            "shading_corr": "correlation of the skin's low-passed luminance, output vs target",
            "lids_shift, brows_shift": "a*b* relative to the cheeks, output vs the source photo (dE)",
        },
        "cases": light,
        "summary": light_summary(light),
        "light_pairs": [f"{s} -> {t}" for s, t in cast.light_pairs],
        "summary_light_pairs": light_summary(_only(light, cast.light_pairs)),
        "identity_light_pairs": summary(_only(sections.by_shape, cast.light_pairs)),
    }


def run(store: ModelStore, media_root: Path, recognizer: FaceRecognizer) -> tuple[dict[str, Any], np.ndarray]:
    """Every section's metrics and the contact sheet (RGB)."""
    cast = read_cast(media_root)
    study = Study(store)
    poisson = Study(store, poisson=True)
    try:
        left, laughing = choose_targets(study, cast, media_root)
        assert cast.source is not None and cast.source_image is not None
        regions, _ = mouth_and_eyes(study, cast.targets, cast.source, prepared_of(cast.source).face)
        choose_pairs(study, cast, left, laughing)
        choose_light_pairs(study, cast)
        sections = measure_sections(study, recognizer, cast)
        light = light_cases(study.mesh, cast.sources, cast.all_targets, cast.pairs)
        rows = sheet_rows(study, poisson, cast, sections)
        masks = mask_shares(study, cast.astronaut)
        cost = cost_per_face(study, cast)
    finally:
        study.close()
        poisson.close()
    source_image, carphone = cast.source_image, cast.carphone
    still = jitter_still(store, cv2.resize(cast.astronaut, (320, 320))[40:280], source_image)
    jitter_clip = {
        "frames": len(carphone),
        "size": "352x288 (2x)",
        **trajectories(store, carphone, source_image, fps=cast.fps, still=False),
    }
    stills = {k: v for k, v in cast.targets.items() if not k.startswith("carphone")}
    seam = seams(store, stills, source_image)
    metrics = {
        "source": "t1.jpg, leftmost face (closed mouth, eyes cast down)",
        "settings": {
            "before": "mask regions none (the source's mouth and eyes over the target's)",
            "after": f"mask regions {','.join(KEPT)} (the default)",
        },
        "regions": regions,
        "identity": identity_json(cast, sections),
        "shape": shape_json(cast, sections),
        "expression": {
            "pairs": [f"{s} -> {t}" for s, t in cast.expression_pairs],
            **sections.expression,
        },
        "light": light_json(cast, sections, light),
        "liveliness_carphone": sections.clip,
        "jitter_still_vp8": still,
        "jitter_carphone": jitter_clip,
        "seam": seam,
        "paste_masks": masks,
        "cost_per_face": cost,
    }
    return metrics, contact_sheet(rows, SHEET_COLUMNS)
