"""Uploaded source faces, bounded: how big an upload may be, how much of it is kept, how many are kept.

A huge upload decoded on the event loop stalled every stream, and kept whole, a hundred photos cost half a
gigabyte. `SourcesConfig.max_pixels` is checked against the image header before decoding
(gateway.image_header); `fit_for_detection` shrinks a large photo for the detector; `crop_around_face` keeps
only the region around the chosen face, and the source is prepared again on that crop; `SourceStore` keeps
at most `max_sources` (least recently used first) for `ttl_s` after last use. A running session keeps its
own reference, so eviction never breaks a live stream.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import cv2
import numpy as np

from engines.frames import SourceFace


@dataclass(frozen=True)
class SourcesConfig:
    max_pixels: int = 40_000_000  # declared width x height above this: 413 before decoding
    max_side: int = 1600  # larger photos are scaled down before face detection
    crop_side: int = 512  # the kept crop around the face is scaled to at most this
    crop_margin: float = 0.6  # face sizes kept around the face box on every side
    max_sources: int = 64  # least recently used beyond this are forgotten
    ttl_s: float = 3600.0  # forgotten this long after their last use; 0 = never

    def __post_init__(self) -> None:
        if self.max_pixels < 1 or self.max_side < 64 or self.crop_side < 64:
            raise ValueError("max_pixels >= 1, max_side >= 64 and crop_side >= 64 are required")
        if self.max_sources < 1:
            raise ValueError("max_sources must be >= 1")
        if self.ttl_s < 0 or self.crop_margin < 0:
            raise ValueError("ttl_s and crop_margin must be >= 0")


def fit_for_detection(image: np.ndarray, max_side: int) -> np.ndarray:
    height, width = image.shape[:2]
    scale = max_side / max(height, width)
    if scale >= 1.0:
        return image
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA)


def face_box(face: SourceFace) -> tuple[float, float, float, float] | None:
    """The chosen face's box (x1, y1, x2, y2) when the pipeline recorded one."""
    box = face.prepared.face.box if face.prepared is not None else None
    if box is None:
        return None
    x1, y1, x2, y2 = (float(v) for v in np.asarray(box).reshape(-1)[:4])
    return (x1, y1, x2, y2) if x2 > x1 and y2 > y1 else None


def crop_around_face(
    image: np.ndarray, box: tuple[float, float, float, float], margin: float, side: int
) -> np.ndarray:
    height, width = image.shape[:2]
    x1, y1, x2, y2 = box
    pad = margin * max(x2 - x1, y2 - y1)
    left, top = max(0, int(x1 - pad)), max(0, int(y1 - pad))
    right, bottom = min(width, int(np.ceil(x2 + pad))), min(height, int(np.ceil(y2 + pad)))
    crop = np.ascontiguousarray(image[top:bottom, left:right])
    return fit_for_detection(crop, side)


def prepare_bounded(
    prepare: Callable[[np.ndarray, str], SourceFace], image: np.ndarray, source_id: str, config: SourcesConfig
) -> SourceFace:
    """Blocking (run it in a worker): detect on a bounded image, then keep only the crop around the face."""
    small = fit_for_detection(image, config.max_side)
    face = prepare(small, source_id)
    box = face_box(face)
    if box is None:
        return face
    crop = crop_around_face(small, box, config.crop_margin, config.crop_side)
    if crop.shape[0] * crop.shape[1] >= small.shape[0] * small.shape[1]:
        return face
    try:
        cropped = prepare(crop, source_id)
    except Exception:  # the face no longer detected on its crop (cut at an edge): keep the first result
        return face
    return SourceFace(id=cropped.id, image=cropped.image, faces=face.faces, prepared=cropped.prepared)


def footprint(obj: object) -> int:
    """Bytes held by the numpy arrays reachable from `obj` (dataclasses, dicts, lists), each counted once."""
    seen: set[int] = set()
    total = 0
    stack: list[object] = [obj]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, np.ndarray):
            root = item
            while isinstance(root.base, np.ndarray):  # a view: count the array that owns the memory
                root = root.base
            if root is item or id(root) not in seen:
                seen.add(id(root))
                total += root.nbytes
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set):
            stack.extend(item)
        elif is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, f.name) for f in fields(item))
        elif hasattr(item, "__dict__") and not isinstance(item, type):
            stack.extend(vars(item).values())
    return total


@dataclass
class _Entry:
    face: SourceFace
    owner: str | None
    bytes: int
    used_s: float


class SourceStore:
    """The bounded table of sources. Event-loop only (no locks); `now` is injectable for tests."""

    def __init__(self, config: SourcesConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._pinned: set[str] = set()
        self.evicted = 0

    def put(self, face: SourceFace, owner: str | None = None, *, pinned: bool = False) -> None:
        self._entries[face.id] = _Entry(face, owner, footprint(face), self._clock())
        self._entries.move_to_end(face.id)
        if pinned:
            self._pinned.add(face.id)
        self.expire()
        while len(self._entries) > self.config.max_sources:
            victim = next((k for k in self._entries if k not in self._pinned and k != face.id), None)
            if victim is None:
                break
            del self._entries[victim]
            self.evicted += 1

    def get(self, source_id: str) -> SourceFace | None:
        """The source, marked as just used; None when unknown, evicted or expired."""
        self.expire()
        entry = self._entries.get(source_id)
        if entry is None:
            return None
        entry.used_s = self._clock()
        self._entries.move_to_end(source_id)
        return entry.face

    def owner(self, source_id: str) -> str | None:
        entry = self._entries.get(source_id)
        return entry.owner if entry is not None else None

    def pop(self, source_id: str) -> SourceFace | None:
        entry = self._entries.pop(source_id, None)
        self._pinned.discard(source_id)
        return entry.face if entry is not None else None

    def expire(self) -> int:
        if self.config.ttl_s <= 0:
            return 0
        limit = self._clock() - self.config.ttl_s
        old = [k for k, e in self._entries.items() if e.used_s < limit and k not in self._pinned]
        for key in old:
            del self._entries[key]
        self.evicted += len(old)
        return len(old)

    def __contains__(self, source_id: object) -> bool:
        return source_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def stats(self) -> dict[str, Any]:
        return {
            "count": len(self._entries),
            "bytes": sum(e.bytes for e in self._entries.values()),
            "max_sources": self.config.max_sources,
            "ttl_s": self.config.ttl_s,
            "evicted": self.evicted,
        }
