"""The face pipeline: detect -> landmarks -> swap -> enhance -> paste back, each stage batched across frames.

`Pipeline.process(items)` takes frames from any number of sessions and runs every stage once for all of them
(one detector batch per letterbox size, one landmarker batch over every face, one swapper and one enhancer
batch). Each output carries its batches' wall times and sizes under `engines.frames`' stage names. Per-frame
`FrameOptions` pick processors and detector size; a frame carrying its session's `FaceTrack` is tracked
(`processors.tracking`), else detected from scratch; `FaceSettings` choose regions kept and faces swapped.
This module finds the faces; swap, enhance and paste (host or torch device) are `engines.image_stages`.
Thread-safety: engines are shared (ONNX Runtime's `Run` is thread-safe), per-call state is local, prepared
source data is read-only, and a `FaceTrack` belongs to one session with one frame in flight.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from engines.engine import Engine
from engines.factory import EngineConfig, create_engine
from engines.frames import (
    STAGE_DETECT,
    STAGE_ENHANCE,
    STAGE_LANDMARK,
    STAGE_SWAP,
    FaceSettings,
    FrameItem,
    FrameOutput,
    NoFaceFound,
    SourceFace,
    SourceNotPrepared,
)
from engines.image_stages import Enhancer, ImageStages, Swapper, image_threads
from engines.models.registry import get_spec
from engines.models.store import ModelStore
from engines.onnx.model_cache import serving_model
from engines.pipeline_config import (
    ENHANCERS,
    SOURCE_DETECT_SIZE,
    SWAPPERS,
    PipelineConfig,
    image_device_of,
)
from engines.processors.arcface import ArcFaceEmbedder
from engines.processors.device_enhancer import DeviceEnhancer, enhance_device
from engines.processors.device_mesh_warp import DeviceMeshWarp
from engines.processors.face_detector import Face, FaceDetector, detector_input_shapes
from engines.processors.face_enhancer import DetailEnhancer, GfpganEnhancer
from engines.processors.face_landmarker import FaceLandmarker
from engines.processors.inswapper import InswapperSwapper, load_emap
from engines.processors.mesh_warp import MeshWarpSwapper
from engines.processors.selection import FaceSelector
from engines.processors.tracking import (
    TrackedFace,
    advance,
    displayed,
    measured,
    needs_detection,
    off_centre,
    plan_meshes,
    relink_lost,
    update,
)
from engines.source.mesh import MeshSource
from engines.source.mesh import prepare as prepare_mesh
from engines.source.prepared import PreparedSource
from engines.stage_timing import StageBook

__all__ = ["ENHANCERS", "SWAPPERS", "Pipeline", "PipelineConfig", "ReferenceUnavailable", "image_device_of"]

log = logging.getLogger(__name__)


class ReferenceUnavailable(ValueError):
    """The `reference` face selector needs the ArcFace embedder, which is not installed."""


class Pipeline:
    def __init__(
        self,
        config: PipelineConfig,
        detector: FaceDetector,
        landmarker: FaceLandmarker,
        swapper: Swapper,
        enhancer: Enhancer | None,
        engines: Sequence[Engine],
        embedder: ArcFaceEmbedder | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.detector = detector
        self.landmarker = landmarker
        self.swapper = swapper
        self.enhancer = enhancer
        self.embedder = embedder
        self._engines = list(engines)
        self._closed = False
        self._clock = clock
        self._defaults = FaceSettings(
            keep_regions=config.keep_regions, selector=config.face_selector, shape=config.shape
        )
        self.selector = FaceSelector(embedder)
        self.images = ImageStages(
            swapper,
            enhancer,
            image_device_of(config),
            enhance_device(config.image_device, config.engine),
            self.swap_data,
            self.settings_of,
        )

    @property
    def device_swap(self) -> DeviceMeshWarp | None:
        """mesh_warp's swap and paste on the image device; None on the numpy/OpenCV path."""
        return self.images.device_swap

    @property
    def device_enhance(self) -> DeviceEnhancer | None:
        """The enhancer's image work on its device; None on the numpy/OpenCV path."""
        return self.images.device_enhance

    @property
    def supports_reference(self) -> bool:
        """Whether `?faces=reference` can work here (the ArcFace embedder is loaded)."""
        return self.embedder is not None

    @classmethod
    def from_config(cls, config: PipelineConfig, store: ModelStore) -> Pipeline:
        """Load every model the config needs (hash-checked by the store).

        Raises ModelUnavailable (one line saying how to get the file) before any engine is built when a
        user-supplied model is missing.
        """
        image_threads(config.engine.intra_op_threads)  # a single-threaded worker's OpenCV calls too
        det_path = store.require("retinaface_mnet025")
        mesh_path = store.require("facemesh_468")
        swap_paths = (
            (store.require("inswapper_128"), store.require("arcface_w600k_r50"))
            if config.swapper == "inswapper_128"
            else None
        )
        # ArcFace also serves the `reference` face selector: loaded whenever it is installed (and verified).
        arcface_path: Path | None = swap_paths[1] if swap_paths else None
        if swap_paths is None:  # one status check hashes the file; require() after it would hash it again
            arcface = store.status(get_spec("arcface_w600k_r50"))
            arcface_path = arcface.path if arcface.verified else None
        wants_gfpgan = STAGE_ENHANCE in config.processors and config.enhancer == "gfpgan_1.4"
        gfpgan_path = store.require("gfpgan_1.4") if wants_gfpgan else None

        engines: list[Engine] = []

        def make(path: Path, name: str, engine_config: EngineConfig = config.engine) -> Engine:
            engine = create_engine(path, engine_config, name=name)
            engines.append(engine)
            return engine

        # the detector's spatial dims are dynamic: GPU engines get the canvases it will run (profiles, graphs)
        det_config = replace(
            config.engine,
            input_shapes=config.engine.input_shapes
            or detector_input_shapes(config.detector_size, max(SOURCE_DETECT_SIZE, config.detector_size)),
        )
        try:
            detector = FaceDetector(
                make(det_path, "face_detector", det_config), config.detector_size, config.detector_score
            )
            landmarker = FaceLandmarker(
                make(serving_model(mesh_path), "face_landmarker"), config.presence_threshold
            )
            swapper: Swapper
            embedder = (
                ArcFaceEmbedder(make(serving_model(arcface_path), "arcface"))
                if arcface_path is not None
                else None
            )
            if swap_paths is not None:
                assert embedder is not None
                inswapper_path = swap_paths[0]
                swapper = InswapperSwapper(
                    make(serving_model(inswapper_path), "face_swapper"),
                    embedder,
                    load_emap(inswapper_path),
                    config.mask,
                )
            else:
                swapper = MeshWarpSwapper(poisson=config.poisson)
            enhancer: Enhancer | None = None
            if STAGE_ENHANCE in config.processors:
                if gfpgan_path is not None:
                    enhancer = GfpganEnhancer(
                        make(serving_model(gfpgan_path), "face_enhancer"), config.enhancer_blend, config.mask
                    )
                else:
                    enhancer = DetailEnhancer(config.enhancer_blend)
        except BaseException:
            for e in engines:
                e.close()
            raise
        return cls(config, detector, landmarker, swapper, enhancer, engines, embedder)

    # -- public API ------------------------------------------------------------------------------------
    def detect(self, images: Sequence[np.ndarray], size: int | None = None) -> list[list[Face]]:
        """Faces per image (largest `max_faces` when set), one detector batch."""
        found = self.detector.detect(images, size or self.config.detector_size, self.config.detector_score)
        return [self._limit(faces) for faces in found]

    def prepare_source(self, image_rgb: np.ndarray, source_id: str) -> SourceFace:
        """Detect the source's largest face once and precompute what the swapper needs for every frame."""
        image = np.ascontiguousarray(image_rgb)
        faces = self.detector.detect(
            [image], max(SOURCE_DETECT_SIZE, self.config.detector_size), self.config.detector_score
        )[0]
        if not faces:
            raise NoFaceFound(f"no face found in source image {source_id!r}")
        face = max(faces, key=lambda f: f.area)
        mesh = self.landmarker.run([(image, face)])[0]
        if not self.landmarker.is_face(mesh):
            raise NoFaceFound(
                f"source image {source_id!r}: the detected face is not a clear face "
                f"(mesh presence {mesh.presence:.2f})"
            )
        face = measured(face, mesh.landmarks, mesh.presence)
        return SourceFace(
            id=source_id, image=image, faces=len(faces), prepared=self._prepared(image, face, mesh.depth)
        )

    def _prepared(self, image: np.ndarray, face: Face, depth: np.ndarray | None) -> PreparedSource:
        """The source's per-frame data for this pipeline's swapper, and its ArcFace embedding (any source may
        be chosen as a session's reference face later) when the embedder is installed."""
        assert face.landmarks is not None
        arcface = self.embedder.embed([(image, face.kps5)])[0] if self.embedder is not None else None
        if isinstance(self.swapper, InswapperSwapper):
            assert arcface is not None  # inswapper loads the embedder
            return PreparedSource(face, depth, latent=self.swapper.latent_of(arcface), arcface=arcface)
        return PreparedSource(face, depth, mesh=prepare_mesh(image, face.landmarks, depth), arcface=arcface)

    def process(self, items: Sequence[FrameItem]) -> list[FrameOutput]:
        """One output per item, in order. Frames with nothing to do pass through unchanged (same array)."""
        if self._closed:
            raise RuntimeError("pipeline is closed")
        book = StageBook(log)
        loaded = set(self.config.processors)
        swap_on = [
            STAGE_SWAP in item.options.processors and STAGE_SWAP in loaded and item.source is not None
            for item in items
        ]
        enhance_on = [
            STAGE_ENHANCE in item.options.processors and self.enhancer is not None for item in items
        ]
        active = [i for i in range(len(items)) if swap_on[i] or enhance_on[i]]
        self._check_prepared(items, active, swap_on)

        faces = self._faces(items, active, book)

        swap_jobs = [(i, f) for i in active if swap_on[i] for f in faces[i]]
        enhance_jobs = [(i, f) for i in active if enhance_on[i] for f in faces[i]]
        staged = self.images.run(items, swap_jobs, enhance_jobs, book)
        outputs = []
        for i, item in enumerate(items):
            timings, sizes = book.for_item(i)
            outputs.append(
                FrameOutput(
                    image=staged.images.get(i, item.image),
                    faces=len(faces[i]),
                    timings_ms=timings,
                    batch_sizes=sizes,
                    changed=tuple(staged.changed.get(i, ())),
                    changed_i420=staged.i420.get(i),
                )
            )
        return outputs

    def warmup(self) -> None:
        """Run every stage once on a synthetic frame so the first real frame does not pay for lazy init."""
        frame = np.full((self.config.detector_size, self.config.detector_size, 3), 128, dtype=np.uint8)
        self.detector.detect([frame])
        s = self.config.detector_size
        fake = Face(
            box=np.array([s * 0.3, s * 0.3, s * 0.7, s * 0.7], dtype=np.float32),
            score=1.0,
            kps5=np.array(
                [[0.4, 0.45], [0.6, 0.45], [0.5, 0.55], [0.42, 0.62], [0.58, 0.62]], dtype=np.float32
            )
            * s,
        )
        mesh = self.landmarker.run([(frame, fake)])[0]
        src: MeshSource | None = None
        if isinstance(self.swapper, InswapperSwapper):
            self.swapper.swap([(frame, fake, np.zeros(512, dtype=np.float32))])
            self.swapper.embedder.embed([(frame, fake.kps5)])
        else:
            src = prepare_mesh(frame, mesh.landmarks, mesh.depth)
            self.swapper.swap([(frame, mesh.landmarks, src)])
        if self.enhancer is not None:
            self.enhancer.enhance([(frame, fake)])
        self.images.warmup(frame, replace(fake, landmarks=mesh.landmarks), src)

    def not_ready_engines(self) -> list[str]:
        """Engines whose server says they cannot run now (remote backends such as Triton; blocking)."""
        return [e.name for e in self._engines if not getattr(e, "is_ready", lambda: True)()]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for engine in self._engines:
            engine.close()

    # -- stages ----------------------------------------------------------------------------------------
    def _limit(self, faces: list[Face]) -> list[Face]:
        if self.config.max_faces is None or len(faces) <= self.config.max_faces:
            return faces
        return sorted(faces, key=lambda f: f.area, reverse=True)[: self.config.max_faces]

    def _check_prepared(self, items: Sequence[FrameItem], active: list[int], swap_on: list[bool]) -> None:
        """SourceNotPrepared before any stage runs (no track moved) when a frame's source or its session's
        reference face was not prepared."""
        for i in active:
            source = items[i].source
            if swap_on[i] and source is not None:
                self.swap_data(source)
            settings = self.settings_of(items[i])
            if settings.selector == "reference" and self.embedder is not None:
                assert settings.reference is not None  # FaceSettings holds one with this selector
                self.reference_embedding(settings.reference)

    def settings_of(self, item: FrameItem) -> FaceSettings:
        track = item.track
        return track.settings if track is not None and track.settings is not None else self._defaults

    def _faces(self, items: Sequence[FrameItem], active: list[int], book: StageBook) -> list[list[Face]]:
        """Detect where needed, mesh every face (tracked or new), move the tracks on, select faces to swap."""
        now = self._clock()
        cfg = self.config.tracking
        due = [
            i
            for i in active
            if needs_detection(
                items[i].track, items[i].image.shape[:2], now, items[i].options.detect_every, cfg
            )
        ]
        detections = self._detect_items(items, due, book)

        jobs: list[tuple[int, Face, TrackedFace | None]] = []
        for i in active:
            track = items[i].track
            if track is None:
                jobs.extend((i, f, None) for f in detections.get(i, []))
            else:
                plan = plan_meshes(
                    track, items[i].image.shape[:2], detections.get(i), cfg, self._time_of(items[i], now)
                )
                jobs.extend((i, f, tf) for f, tf in plan)
        meshed: dict[int, list[Face]] = {i: [] for i in active}
        updated: set[int] = set()
        self._mesh_jobs(items, jobs, book, now, meshed, updated)

        if cfg.redetect_lost:  # a tracked face lost on a frame that did not detect: look for it in this frame
            retry = [
                i
                for i in active
                if i not in detections
                and (track := items[i].track) is not None
                and any(id(tf) not in updated for tf in track.faces)
            ]
            found = self._detect_items(items, retry, book)
            detections.update(found)
            jobs = []
            for i, faces in found.items():
                track = items[i].track
                assert track is not None
                jobs.extend(
                    (i, f, tf)
                    for f, tf in relink_lost(track, faces, updated, cfg, self._time_of(items[i], now))
                )
            self._mesh_jobs(items, jobs, book, now, meshed, updated)

        out: list[list[Face]] = [[] for _ in items]
        for i in active:
            item, track = items[i], items[i].track
            settings = self.settings_of(item)
            reference = (
                self.reference_embedding(settings.reference)
                if settings.selector == "reference"
                and settings.reference is not None
                and self.embedder is not None
                else None
            )
            if track is None:
                out[i] = self.selector.select(item.image, settings, meshed[i], None, None, reference)
                continue
            alive = advance(
                track,
                item.image.shape[:2],
                meshed[i],
                updated,
                i in detections,
                now,
                self._time_of(item, now),
                cfg,
                self.config.max_faces,
            )
            shown = [displayed(tf, self._time_of(item, now), cfg) for tf in alive]
            out[i] = self.selector.select(item.image, settings, shown, alive, track, reference)
            track.last_faces = out[i]
        return out

    def _detect_items(
        self, items: Sequence[FrameItem], idxs: Sequence[int], book: StageBook
    ) -> dict[int, list[Face]]:
        """Run the detector on these items (one batch per detector size); item index -> faces."""
        by_size: dict[int, list[int]] = {}
        for i in idxs:
            by_size.setdefault(items[i].options.detect_size or self.config.detector_size, []).append(i)
        detections: dict[int, list[Face]] = {}
        for size, group in by_size.items():
            with book.time(STAGE_DETECT, group, len(group)):
                found = self.detector.detect(
                    [items[i].image for i in group], size, self.config.detector_score
                )
            for i, f in zip(group, found, strict=True):
                detections[i] = self._limit(f)
        return detections

    def _mesh_jobs(
        self,
        items: Sequence[FrameItem],
        jobs: Sequence[tuple[int, Face, TrackedFace | None]],
        book: StageBook,
        now: float,
        meshed: dict[int, list[Face]],
        updated: set[int],
    ) -> None:
        """FaceMesh on every (item, crop face, track) job as one batch (and once more, as a second batch, for
        meshes far off their crop's centre: `TrackingConfig.refine_offset`): a tracked face is updated (and
        its `id()` added to `updated`), a new one appended to `meshed[item]`; crops without a face are
        dropped."""
        if not jobs:
            return
        with book.time(STAGE_LANDMARK, sorted({i for i, _, _ in jobs}), len(jobs)):
            meshes = self.landmarker.run([(items[i].image, f) for i, f, _ in jobs])
        faces = [
            measured(crop, m.landmarks, m.presence) if self.landmarker.is_face(m) else None
            for (_, crop, _), m in zip(jobs, meshes, strict=True)
        ]
        limit = self.config.tracking.refine_offset
        again = [
            (k, f)
            for k, f in enumerate(faces)
            if f is not None and limit > 0 and off_centre(jobs[k][1], f) > limit
        ]
        if again:  # off its crop's centre: once more from its own crop
            with book.time(STAGE_LANDMARK, sorted({jobs[k][0] for k, _ in again}), len(again)):
                second = self.landmarker.run([(items[jobs[k][0]].image, seed) for k, seed in again])
            for (k, seed), m in zip(again, second, strict=True):
                if self.landmarker.is_face(m):
                    faces[k] = measured(seed, m.landmarks, m.presence)
        for (i, _crop, tf), face in zip(jobs, faces, strict=True):
            if face is None:
                continue
            if tf is None:
                meshed[i].append(face)
            else:
                update(tf, face, self._time_of(items[i], now), self.config.tracking)
                updated.add(id(tf))

    def _time_of(self, item: FrameItem, now: float) -> float:
        return item.time_s if item.time_s is not None else now

    def reference_embedding(self, reference: SourceFace) -> np.ndarray:
        """(512,) ArcFace embedding of a reference face, made when it was prepared."""
        if self.embedder is None:
            raise ReferenceUnavailable(
                "face selector 'reference' needs the ArcFace embedder "
                "(arcface_w600k_r50); see `python -m engines.models list`"
            )
        prepared = reference.prepared
        if prepared is None or prepared.arcface is None:
            raise SourceNotPrepared(
                f"reference face {reference.id!r} has no ArcFace embedding: prepare it (prepare_source) "
                "before a session selects it"
            )
        return np.asarray(prepared.arcface, dtype=np.float32)

    def swap_data(self, source: SourceFace) -> MeshSource | np.ndarray:
        """The swapper's per-source data (mesh_warp's `MeshSource`, inswapper's latent), made when the source
        was prepared; SourceNotPrepared when it was not, by a pipeline with this swapper."""
        prepared = source.prepared
        data: MeshSource | np.ndarray | None = None
        if prepared is not None:
            data = prepared.latent if isinstance(self.swapper, InswapperSwapper) else prepared.mesh
        if data is None:
            raise SourceNotPrepared(
                f"source {source.id!r} was not prepared for the {self.swapper.name} swapper: sources are "
                "prepared once (prepare_source) before a session uses them, never on the live path"
            )
        return data
