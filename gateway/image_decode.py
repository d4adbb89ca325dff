"""Decoding an uploaded image in a child process, not in a thread of the gateway (issue 13, item 9).

Why, measured (docs/BENCHMARKS.md, "Requests under attack"): a valid image without a face
(the fuzzer's 1-3000 px PNGs) cost the gateway ~45 ms of CPU, and 100 such requests/s raised the live
session's p95 by 77 % although the work already ran on a nice-10 worker thread. Decoding and shrinking a
3000x3000 picture with OpenCV fans out over OpenCV's own thread pool, whose threads run at normal priority
(the pool belongs to the whole process, not to the nice worker), and holds the GIL in stretches: a thread
doing only this stalled the main thread's 1 ms sleeps by up to 45 ms (p99 8 ms). In a child process at the
background niceness with one OpenCV thread the same work shares neither the GIL nor the live frames'
priority; only the already shrunk image (at most `max_side` on its long side) comes back.

`decode_for_source` is what the child runs: it returns ("ok", RGB image) or (kind, one-line reason) and never
raises, so no exception has to cross the process boundary.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import cv2
import numpy as np

from gateway.media.image_header import ImageHeaderError, image_size
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
