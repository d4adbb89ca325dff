"""The data that crosses the gateway → pipeline boundary (the contract between gateway/ and engines/).

One `FrameItem` per video frame, from any session; `Pipeline.process(items)` returns one `FrameOutput` per
item, in order. Images are HxWx3 uint8 RGB; any size, and the size may change between frames of a session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Stage names used for timings everywhere (pipeline, monitor, reports, dashboard).
STAGE_DETECT = "face_detector"
STAGE_LANDMARK = "face_landmarker"
STAGE_SWAP = "face_swapper"
STAGE_ENHANCE = "face_enhancer"
STAGE_PASTE = "paste_back"
PIPELINE_STAGES: tuple[str, ...] = (STAGE_DETECT, STAGE_LANDMARK, STAGE_SWAP, STAGE_ENHANCE, STAGE_PASTE)

# Processors a session may ask for (FaceFusion's vocabulary). Detection/landmarks run whenever one is on.
PROCESSORS: tuple[str, ...] = (STAGE_SWAP, STAGE_ENHANCE)


class NoFaceFound(ValueError):
    """The image given as a source face contains no face."""


@dataclass
class SourceFace:
    """A source face prepared once (landmarks, crops, embeddings) and reused for every frame of a session."""

    id: str
    image: np.ndarray
    faces: int
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class FaceTrack:
    """Per-session state the pipeline may carry between frames (e.g. last detections, for detect-every-N)."""

    last_faces: Any = None
    frames_since_detect: int = 0
    frame_shape: tuple[int, ...] | None = None  # (h, w) the faces were found at; a new size forces detection


@dataclass(frozen=True)
class FrameOptions:
    """Per-frame knobs set by the degradation controller."""

    processors: tuple[str, ...] = (STAGE_SWAP,)
    detect_every: int = 1          # 2 = run the detector every 2nd frame, reuse the track in between
    detect_size: int | None = None  # override the detector's letterbox size (lower = cheaper)


@dataclass
class FrameItem:
    image: np.ndarray
    source: SourceFace | None
    options: FrameOptions = FrameOptions()
    track: FaceTrack | None = None


@dataclass
class FrameOutput:
    image: np.ndarray
    faces: int
    timings_ms: dict[str, float] = field(default_factory=dict)  # stage -> ms (that stage's batch time)
    batch_sizes: dict[str, int] = field(default_factory=dict)   # stage -> items in the batch that ran it
