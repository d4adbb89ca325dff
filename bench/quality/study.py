"""The quality report's pipeline and inputs: one `Study` (the real pipeline, weight-free) and what feeds it.

The measurements (bench.quality.measures) and the report (bench.quality.report) share these: reading the
provisioned media, a clip's frames, a still through VP8, the swap of one image or of a whole clip through
the tracked pipeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import av
import cv2
import numpy as np

from bench.quality.identity import FaceRecognizer
from engines.frames import FACE_SHAPE, KEPT_REGIONS, FaceSettings, FaceTrack, FrameItem, SourceFace
from engines.models.store import ModelStore
from engines.pipeline import Pipeline, PipelineConfig
from engines.processors.face_detector import Face
from engines.processors.tracking import TrackingConfig, measured
from loadgen.contact_sheet import webcam_frame
from loadgen.media import MediaUnavailable

KEPT = KEPT_REGIONS


def read_rgb(path: Path) -> np.ndarray:
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise MediaUnavailable(f"{path} is not a readable image")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def clip_frames(path: Path, size: tuple[int, int] | None = None) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    return [cv2.resize(f, size, interpolation=cv2.INTER_CUBIC) for f in frames] if size else frames


def vp8_round_trip(
    image: np.ndarray, frames: int, bitrate: int = 300_000, noise_sigma: float = 0.0
) -> list[np.ndarray]:
    """The same image encoded and decoded `frames` times by libvpx (realtime, as the gateway's encoder),
    optionally with fresh Gaussian noise per frame (a camera's sensor noise)."""
    rng = np.random.default_rng(0)
    h, w = image.shape[:2]
    enc = av.CodecContext.create("libvpx", "w")
    enc.width, enc.height, enc.pix_fmt, enc.bit_rate = w, h, "yuv420p", bitrate
    enc.options = {"deadline": "realtime", "cpu-used": "8", "lag-in-frames": "0"}
    dec = av.CodecContext.create("vp8", "r")
    out: list[np.ndarray] = []
    for k in range(frames):
        noisy = (
            image
            if noise_sigma <= 0
            else np.clip(image.astype(np.float32) + rng.normal(0, noise_sigma, image.shape), 0, 255).astype(
                np.uint8
            )
        )
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(noisy), format="rgb24")
        frame.pts = k
        for packet in enc.encode(frame):  # type: ignore[attr-defined]
            out.extend(d.to_ndarray(format="rgb24") for d in dec.decode(packet))  # type: ignore[attr-defined]
    return out


class Study:
    """The pipeline and the helpers the measurements share."""

    def __init__(
        self,
        store: ModelStore,
        keep: tuple[str, ...] = KEPT,
        poisson: bool = False,
        tracking: TrackingConfig | None = None,
        shape: float = FACE_SHAPE,
    ) -> None:
        config = PipelineConfig(keep_regions=keep, poisson=poisson, tracking=tracking or TrackingConfig())
        self.pipeline = Pipeline.from_config(config, store)
        self.shape = shape

    def close(self) -> None:
        self.pipeline.close()

    def mesh(self, image: np.ndarray, pick: str = "largest") -> Face | None:
        faces = self.pipeline.detect([image])[0]
        if not faces:
            return None
        face = max(faces, key=lambda f: f.area) if pick == "largest" else faces[0]
        m = self.pipeline.landmarker.run([(image, face)])[0]
        return measured(face, m.landmarks, m.presence) if self.pipeline.landmarker.is_face(m) else None

    def swap(
        self, image: np.ndarray, source: SourceFace, keep: tuple[str, ...], shape: float | None = None
    ) -> tuple[np.ndarray, Face | None]:
        alpha = self.shape if shape is None else shape
        track = FaceTrack(settings=FaceSettings(keep_regions=keep, selector="one", shape=alpha))
        out = self.pipeline.process([FrameItem(image, source, track=track, time_s=0.0)])[0]
        return out.image, (track.faces[0].shown if track.faces else None)


def clip_outputs(
    study: Study,
    frames: Sequence[np.ndarray],
    source: SourceFace,
    keep: tuple[str, ...],
    fps: float,
    shape: float | None = None,
) -> list[tuple[np.ndarray, Face | None]]:
    """The clip through the tracked pipeline, one session keeping `keep` (and taking `shape` of the source's
    face shape, default the study's): each output and its face."""
    alpha = study.shape if shape is None else shape
    track = FaceTrack(settings=FaceSettings(keep_regions=keep, selector="one", shape=alpha))
    out: list[tuple[np.ndarray, Face | None]] = []
    for k, frame in enumerate(frames):
        result = study.pipeline.process([FrameItem(frame, source, track=track, time_s=k / fps)])[0]
        out.append((result.image, track.faces[0].shown if track.faces else None))
    return out


def face_crop(image: np.ndarray, box: np.ndarray, pad: float = 0.5) -> np.ndarray:
    """The face at `box` with `pad` of its width around it (a group photo's neighbours stay out)."""
    x1, y1, x2, y2 = box.astype(int)
    p = int(pad * (x2 - x1))
    return np.ascontiguousarray(image[max(y1 - p, 0) : y2 + p, max(x1 - p, 0) : x2 + p])


def held_out(study: Study, image: np.ndarray) -> np.ndarray:
    """A held-out photo as a 640x360 webcam frame around its largest face."""
    faces = study.pipeline.detect([image])[0]
    if not faces:
        raise MediaUnavailable("no face found in a held-out photo")
    return webcam_frame(image, max(faces, key=lambda f: f.area).box)


def face_of(study: Study, image: np.ndarray) -> Face:
    face = study.mesh(image)
    if face is None:
        raise MediaUnavailable("no face found in a quality-report image")
    return face


def embed_source(recognizer: FaceRecognizer, image: np.ndarray) -> np.ndarray:
    e = recognizer.embed(image)
    if e is None:
        raise MediaUnavailable("the identity measure found no face in the source")
    return e
