"""What a pipeline is asked to run: the processors, the models' choices, per-face defaults, the engine.

Validated once when built (a bad choice is a one-line ValueError at the edge), read by `engines.pipeline`.
Each field and its default are written here only: the gateway holds this config as it is, and its options
point at these fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engines.factory import EngineConfig
from engines.frames import FACE_SELECTORS, FACE_SHAPE, KEPT_REGIONS, PROCESSORS, STAGE_SWAP, FaceSettings
from engines.processors.device_mesh_warp import swap_device
from engines.processors.masks import BoxMaskConfig
from engines.processors.tracking import TrackingConfig

SWAPPERS: tuple[str, ...] = ("mesh_warp", "inswapper_128")
ENHANCERS: tuple[str, ...] = ("detail", "gfpgan_1.4")
SOURCE_DETECT_SIZE = 640  # a source is detected once: spend the time for better points


@dataclass(frozen=True)
class PipelineConfig:
    processors: tuple[str, ...] = (STAGE_SWAP,)
    swapper: str = "mesh_warp"  # | "inswapper_128"
    enhancer: str = "detail"  # | "gfpgan_1.4"
    detector_size: int = 320
    detector_score: float = 0.5
    max_faces: int | None = None  # only the N largest faces of a frame
    enhancer_blend: float = 0.8
    presence_threshold: float = 0.5  # FaceMesh presence below this drops the face (false or lost face)
    keep_regions: tuple[str, ...] = KEPT_REGIONS  # target regions kept by default (mouth, eyes)
    face_selector: str = "many"  # default for sessions that ask nothing: many | one
    shape: float = FACE_SHAPE  # mesh_warp: how much of the source's face shape (0..1), by default
    mask: BoxMaskConfig = field(default_factory=BoxMaskConfig)  # inswapper / GFPGAN paste mask
    poisson: bool = False  # mesh_warp: the relit face Poisson-cloned (seamlessClone) instead of pasted
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    # torch device for the swap and enhancer stages' image work (mesh_warp: warp, masks, colour, paste; the
    # enhancer: crops, masks, paste; the frame goes up and back once per batch, with its changed boxes' I420
    # planes). None = numpy/OpenCV, except with `--engine torch --providers cuda`, where it is that CUDA
    # device (`image_device_of`, `enhance_device`).
    image_device: str | None = None

    def __post_init__(self) -> None:
        unknown = [p for p in self.processors if p not in PROCESSORS]
        if unknown:
            raise ValueError(f"unknown processors {unknown}; known: {', '.join(PROCESSORS)}")
        if self.swapper not in SWAPPERS:
            raise ValueError(f"unknown swapper {self.swapper!r}; known: {', '.join(SWAPPERS)}")
        if self.enhancer not in ENHANCERS:
            raise ValueError(f"unknown enhancer {self.enhancer!r}; known: {', '.join(ENHANCERS)}")
        if self.detector_size < 32 or self.detector_size % 32:
            raise ValueError(f"detector_size must be a multiple of 32 (>= 32), got {self.detector_size}")
        if not 0.0 < self.detector_score < 1.0:
            raise ValueError(f"detector_score must be between 0 and 1, got {self.detector_score}")
        if self.max_faces is not None and self.max_faces < 1:
            raise ValueError("max_faces must be >= 1 or None")
        FaceSettings(keep_regions=self.keep_regions, shape=self.shape)  # validates regions and shape
        if self.face_selector not in FACE_SELECTORS or self.face_selector == "reference":
            raise ValueError(
                f"default face selector must be many or one, got {self.face_selector!r} "
                "(reference is chosen per session, with its reference face)"
            )


def image_device_of(config: PipelineConfig) -> str | None:
    return swap_device(config.swapper, config.poisson, config.image_device, config.engine)
