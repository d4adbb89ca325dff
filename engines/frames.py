"""The data that crosses the gateway → pipeline boundary (the contract between gateway/ and engines/).

One `FrameItem` per video frame, from any session; `Pipeline.process(items)` returns one `FrameOutput` per
item, in order. Images are HxWx3 uint8 RGB; any size, and the size may change between frames of a session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from engines.source.prepared import PreparedSource

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


class SourceNotPrepared(ValueError):
    """A frame's source (or its session's reference face) was not prepared by this pipeline: sources are
    prepared once, before a session uses them (`Pipeline.prepare_source`), never on the live path."""


@dataclass
class SourceFace:
    """A source face: its image, how many faces it showed, and what its preparation made once for every
    frame of every session (`engines.source.prepared.PreparedSource`; None: not prepared, refused live)."""

    id: str
    image: np.ndarray
    faces: int
    prepared: PreparedSource | None = None


# Target regions a session may keep from the original frame (masked out of the swap), those kept by default,
# and face selectors. `eyes` = the eye openings (gaze), `eye_area` = with lids and lashes (see
# engines.processors.masks).
MASK_REGIONS: tuple[str, ...] = ("mouth", "eyes", "eye_area")
KEPT_REGIONS: tuple[str, ...] = ("mouth", "eyes")
FACE_SELECTORS: tuple[str, ...] = ("many", "one", "reference")


FACE_SHAPE = 1.0  # how much of the source's face shape the swap takes by default (0 = the target's)


def check_shape(value: float) -> float:
    """A face-shape strength, 0..1 (ValueError otherwise: not a number, NaN, out of range)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"face shape must be a number in 0..1, got {value!r}")
    return float(value)


@dataclass(frozen=True, eq=False)
class FaceSettings:
    """What a session asked for about faces: which target regions stay (mouth, eyes: kept from the target
    so teeth, tongue, blinks and gaze stay alive), which faces are swapped (`many` = all, `one` = the
    largest, `reference` = the face most like `reference`'s, which needs the ArcFace embedder), and how much
    of the source's face shape (outline, jaw, proportions) the swap takes (`shape`, 0..1)."""

    keep_regions: tuple[str, ...] = KEPT_REGIONS
    selector: str = "many"
    reference: SourceFace | None = None
    shape: float = FACE_SHAPE

    def __post_init__(self) -> None:
        check_shape(self.shape)
        unknown = [r for r in self.keep_regions if r not in MASK_REGIONS]
        if unknown:
            known = ", ".join(MASK_REGIONS)
            raise ValueError(f"unknown mask region(s) {', '.join(unknown)} (known: {known})")
        if self.selector not in FACE_SELECTORS:
            raise ValueError(f"unknown face selector {self.selector!r} (known: {', '.join(FACE_SELECTORS)})")
        if self.selector == "reference" and self.reference is None:
            raise ValueError("face selector 'reference' needs a reference face")


@dataclass
class FaceTrack:
    """Per-session face state the pipeline carries between frames; one frame of a session in flight at a time.

    `faces` holds the session's tracked faces (`engines.processors.tracking.TrackedFace`: id, last mesh,
    One Euro filter, misses); `settings` is what the session asked for (None = the pipeline's defaults).
    `last_faces` are the faces the last frame worked on.
    """

    last_faces: Any = None
    frames_since_detect: int = 0
    frame_shape: tuple[int, ...] | None = None  # (h, w) the faces were found at; a new size forces detection
    settings: FaceSettings | None = None
    faces: list[Any] = field(default_factory=list)
    next_id: int = 0
    last_detect_s: float | None = None
    lost: bool = False  # a tracked face's presence dropped: detect on the next frame
    selected_id: int | None = None  # `one`: the track chosen, kept while it lives (no flipping between faces)


@dataclass(frozen=True)
class FrameOptions:
    """Per-frame knobs set by the degradation controller."""

    processors: tuple[str, ...] = (STAGE_SWAP,)
    detect_every: int = 1  # 2 = run the detector every 2nd frame, reuse the track in between
    detect_size: int | None = None  # override the detector's letterbox size (lower = cheaper)


@dataclass
class FrameItem:
    image: np.ndarray
    source: SourceFace | None
    options: FrameOptions = FrameOptions()
    track: FaceTrack | None = None
    time_s: float | None = None  # capture time (smoothing's clock); None = when the pipeline sees it


@dataclass
class FrameOutput:
    image: np.ndarray
    faces: int
    timings_ms: dict[str, float] = field(default_factory=dict)  # stage -> ms (that stage's batch time)
    batch_sizes: dict[str, int] = field(default_factory=dict)  # stage -> items in the batch that ran it
    # Where `image` differs from the input: (x0, y0, x1, y1) boxes, () = the input itself, unchanged; None =
    # not known (treat the whole frame as changed). Lets the gateway convert only these regions back to YUV.
    changed: tuple[tuple[int, int, int, int], ...] | None = None
    # One per `changed` box, when the device path made them: the I420 planes (Y, U, V flat, as
    # `gateway.media.colour.rgb_to_i420`) of `image` over `even_box(box)`, None for an empty box. None = the
    # gateway converts those boxes itself.
    changed_i420: tuple[np.ndarray | None, ...] | None = None


Box = tuple[int, int, int, int]  # x0, y0, x1, y1 (exclusive), pixels


def even_box(box: Box, width: int, height: int) -> Box | None:
    """`box` clipped to the frame and widened to even corners (whole chroma blocks); None when empty."""
    x0, y0, x1, y1 = box
    x0, y0 = max(0, x0 - x0 % 2), max(0, y0 - y0 % 2)
    x1, y1 = min(width, x1 + x1 % 2), min(height, y1 + y1 % 2)
    if x1 <= x0 or y1 <= y0:
        return None
    return x0, y0, x1, y1
