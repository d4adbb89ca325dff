"""Decoding an uploaded image in a child process, not in a thread of the gateway.

OpenCV decodes and shrinks on its own thread pool at normal priority and holds the GIL in stretches, so
even on a low-priority thread it stalled the live frames. A child process at the background niceness with
one OpenCV thread shares neither the GIL nor their priority; only the shrunk image (at most `max_side` on
its long side) comes back. `decode_for_source` is what the child runs: ("ok", RGB image) or (kind, one-line
reason), never an exception across the process boundary. Measurements: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import cv2
import numpy as np

from gateway.image_header import ImageHeaderError, image_size
from gateway.source_store import fit_for_detection

Outcome = tuple[str, Any]  # ("ok", HxWx3 RGB) | ("unsupported" | "too_large" | "empty", reason)


def decode_for_source(body: bytes, max_pixels: int, max_side: int) -> Outcome:
    """Header check, decode, BGR -> RGB, shrink to `max_side` (blocking; runs in the child)."""
    try:
        width, height = image_size(body)
    except ImageHeaderError as exc:
        return "unsupported", f"body is not a decodable jpeg/png/webp image ({exc})"
    if width < 1 or height < 1:
        return "empty", f"image declares an empty size {width}x{height}"
    if width * height > max_pixels:
        return (
            "too_large",
            f"image is {width}x{height} = {width * height} pixels; the limit is {max_pixels} pixels",
        )
    try:
        bgr = cv2.imdecode(np.frombuffer(body, dtype=np.uint8), cv2.IMREAD_COLOR) if body else None
    except (cv2.error, ValueError, MemoryError, OverflowError) as exc:
        return "unsupported", f"image cannot be decoded: {type(exc).__name__}"
    if bgr is None:
        return "unsupported", "body is not a decodable jpeg/png/webp image"
    return "ok", np.ascontiguousarray(cv2.cvtColor(fit_for_detection(bgr, max_side), cv2.COLOR_BGR2RGB))


def _child_init(nice: int) -> None:
    if nice and hasattr(os, "nice"):
        try:
            os.nice(nice)
        except OSError:
            pass
    cv2.setNumThreads(1)  # this process only: the gateway's own OpenCV threading is untouched


def decode_pool(nice: int, workers: int = 1) -> ProcessPoolExecutor:
    """A pool of `workers` child processes (spawned, so no thread or model of the gateway is forked), started
    on first use."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_child_init,
        initargs=(nice,),
    )
