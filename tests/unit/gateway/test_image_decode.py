"""Uploaded images are decoded in a child process (gateway.image_decode): the outcomes it returns instead of
raising, and that the pool really runs elsewhere, with one OpenCV thread."""

from __future__ import annotations

import asyncio
import os

import cv2
import numpy as np

from bench.fuzz_cases import png_bomb
from gateway.image_decode import decode_for_source, decode_pool


def _png(width: int, height: int) -> bytes:
    image = np.zeros((height, width, 3), np.uint8)
    image[..., 2] = 200  # red in BGR
    ok, buf = cv2.imencode(".png", image)
    assert ok
    return buf.tobytes()


def test_a_large_image_comes_back_as_rgb_shrunk_to_max_side() -> None:
    kind, image = decode_for_source(_png(1200, 600), 40_000_000, 400)
    assert kind == "ok"
    assert image.shape == (200, 400, 3)
    assert image[0, 0].tolist() == [200, 0, 0]  # RGB


def test_refusals_are_outcomes_not_exceptions() -> None:
    assert decode_for_source(png_bomb(65535, 65535, rows=0), 40_000_000, 1600)[0] == "too_large"
    assert decode_for_source(b"not an image at all", 40_000_000, 1600)[0] == "unsupported"
    assert decode_for_source(_png(64, 64)[:60], 40_000_000, 1600)[0] == "unsupported"
    assert decode_for_source(b"", 40_000_000, 1600)[0] == "unsupported"


def test_the_pool_decodes_in_another_process_with_one_opencv_thread() -> None:
    pool = decode_pool(nice=0)
    try:
        loop = asyncio.new_event_loop()
        try:
            kind, image = loop.run_until_complete(
                loop.run_in_executor(pool, decode_for_source, _png(50, 40), 1_000_000, 1600)
            )
        finally:
            loop.close()
        assert kind == "ok" and image.shape == (40, 50, 3)
        assert pool.submit(os.getpid).result(30) != os.getpid()
        assert pool.submit(cv2.getNumThreads).result(30) == 1
    finally:
        pool.shutdown()
