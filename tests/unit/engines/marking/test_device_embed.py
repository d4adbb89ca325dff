"""The device path's mark (engines.marking.device_embed) on CPU torch against the numpy path: the same change
to within a fifth of a grey level on average (5 at most, on a few pixels at the busiest gain: torch's
average pool and OpenCV's area resize split a fractional pixel differently, and the cancelling follows the
samples), and the same detection."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engines.marking.detect import Detector
from engines.marking.embed import REFRESH, Embedder
from engines.marking.pattern import Payload, coefficients, key_id

torch = pytest.importorskip("torch")

from engines.marking.device_embed import DeviceEmbedder  # noqa: E402

KEY = b"k" * 32


@pytest.mark.parametrize("size", [(360, 640), (240, 320)])
def test_device_mark_matches_the_numpy_mark(astronaut: np.ndarray, size: tuple[int, int]) -> None:
    h, w = size
    luma = cv2.resize(cv2.cvtColor(astronaut, cv2.COLOR_RGB2GRAY), (w, h))
    payload = Payload(key_id(KEY), 9, 99)
    embedder = Embedder(*coefficients(KEY, payload))
    cpu = embedder.delta(luma)
    device = DeviceEmbedder(embedder).delta(torch.from_numpy(luma)).numpy()
    assert device.shape == cpu.shape
    assert np.abs(device - cpu).mean() < 0.2 and np.abs(device - cpu).max() < 5.0
    face = cv2.resize(luma, (h * 3 // 4, h * 3 // 4))
    back = cv2.GaussianBlur(np.random.default_rng(1).integers(60, 200, (h, w)).astype(np.uint8), (0, 0), 6)
    frames = []
    for k in range(8):
        frame = back.copy()
        x = w // 8 + 4 * k
        frame[h // 8 : h // 8 + face.shape[0], x : x + face.shape[1]] = face
        tensor = torch.from_numpy(frame)
        DeviceEmbedder(embedder).mark(tensor)
        frames.append(tensor.numpy())
    result = Detector(KEY).window(frames)
    assert result.detected and result.payload == payload


def test_device_mark_holds_its_change_between_refreshes_as_the_numpy_mark(astronaut: np.ndarray) -> None:
    luma = cv2.resize(cv2.cvtColor(astronaut, cv2.COLOR_RGB2GRAY), (640, 360))
    embedder = Embedder(*coefficients(KEY, Payload(key_id(KEY), 9, 99)))
    host, device = Embedder(*coefficients(KEY, Payload(key_id(KEY), 9, 99))), DeviceEmbedder(embedder)
    changes = []
    for k in range(2 * REFRESH):
        frame = np.roll(luma, 6 * k, axis=1)
        cpu, tensor = frame.copy(), torch.from_numpy(frame.copy())
        host.mark(cpu)
        device.mark(tensor)
        change = tensor.numpy().astype(np.int16) - frame
        assert np.abs(change - (cpu.astype(np.int16) - frame)).mean() < 0.2
        changes.append(change)
    moved = np.roll(luma, 6, axis=1)
    inside = (np.minimum(luma, moved) > 16) & (np.maximum(luma, moved) < 239)  # the mark (< 16): no clip
    held = np.abs(changes[1] - changes[0])[inside]
    assert held.max() <= 1 and np.mean(held == 0) > 0.995  # held (round-half-even ties aside)
    assert np.mean(changes[REFRESH] == changes[0]) < 0.9  # then worked out again
