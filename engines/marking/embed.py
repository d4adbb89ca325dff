"""Writing the mark into a frame's luma, on the CPU (numpy and OpenCV).

At the chips' resolution but the last step: the picture read as the detector will (`samples`); what it
already says along each layer's pattern (one small matrix product), cancelled in this frame's coefficients
(improved spread spectrum, Malvar & Florencio 2003: the detector reads the mark, not the picture's chance
resemblance to it); a gain per chip from the texture around it, the least contrast over an `ERODE`-chip
square (an isolated edge hides nothing on its flat side), `GAIN_FLAT` on flat areas up to `GAIN_BUSY`; then
the chips spread to pixels (one bilinear resize) and added with saturation, in place. The chips written are
the patterns less their 3 x 3-chip mean (`high_passed`): the detector whitens that part away, and the eye sees
it most on flat areas. A stream's change is worked out on every `REFRESH`-th frame and held in between.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from engines.marking.pattern import CHIPS_PER_HEIGHT, TILE, chip_size
from engines.marking.samples import SAMPLES, folded, response, sampled, whitened

STRENGTH = 2.0  # the mark's amplitude (grey levels, RMS) at gain 1
GAIN_FLAT = 0.6  # gain on a flat area
GAIN_BUSY = 3.0  # the most on a busy one
CONTRAST_REF = 4.0  # a chip's contrast (grey levels) at which the gain reaches 1
MAX_RMS = 1.9  # grey levels: the most a frame's mark may carry (PSNR >= 42.5 dB against the unmarked frame)
SPREAD_RMS = 0.67  # a chip pattern's RMS left in pixels after the bilinear spread (white chips, any size)
ERODE = 5  # chips: the contrast that raises the gain must fill a square this wide (texture, not an edge)
CANCEL = 1.0  # how much of the picture's own projection is cancelled
CANCEL_CAP = 1.0  # the cancelling part's energy at most this times the mark's own
INNER = 0.1  # of the chips on each side: the ring outside the inner part, which a crop cuts first
REFRESH = 4  # frames: `mark` works the change out on every REFRESH-th frame and holds it in between
START_GAIN = 2.5  # the mark's strength over a stream's first `START_FRAMES` frames (still held to `MAX_RMS`)
START_FRAMES = 15  # frames at `START_GAIN`; it then fades to 1 over as many again


def grid_shape(height: int, width: int) -> tuple[int, int, int]:
    """Rows and columns of chips covering a height x width picture, and the width (pixels) that many columns
    spread to (cropped to `width` after the resize, so every chip is square)."""
    s = chip_size(height)
    cols = math.ceil(width / s)
    return CHIPS_PER_HEIGHT, cols, max(width, round(cols * s))


def start_gain(frame: int) -> float:
    """The strength's factor on a stream's `frame`-th marked frame (0 the first, counted again when the
    picture's size changes): `START_GAIN` over the first `START_FRAMES`, fading to 1 over as many again. An
    encoder's start (a keyframe at the target rate, then its climb) keeps about half of the mark; a stronger
    start lets the first second be found too. `MAX_RMS` bounds every frame as before."""
    if frame < START_FRAMES:
        return START_GAIN
    fade = (frame - START_FRAMES) / START_FRAMES
    return 1.0 if fade >= 1.0 else START_GAIN + (1.0 - START_GAIN) * fade


class Schedule:
    """When a stream's mark is worked out anew, and how strong: the bookkeeping the CPU and the device
    embedders share (they hold the change themselves). Anew on the first frame, on a new picture size, after
    `drop` or `restart`, and on every `REFRESH`-th frame; its strength is `start_gain` of the frames since
    the start, the last new size or `restart`."""

    def __init__(self) -> None:
        self._shape: tuple[int, ...] | None = None
        self._due = True
        self._age = 0  # frames the held change has stood since it was worked out
        self._frame = 0  # frames since the start, a new size or `restart` (`start_gain`)

    def drop(self) -> None:
        """The held change no longer stands (new coefficients): the next frame works its own out."""
        self._due = True

    def restart(self) -> None:
        """The encoder starts again on the next frame (a keyframe): the stronger start, worked out then."""
        self._due, self._frame = True, 0

    def next(self, shape: tuple[int, ...]) -> float | None:
        """For the frame about to be marked (`shape`: its luma's): the strength its change is worked out
        at, or None where the change held from the frame before stands."""
        if shape != self._shape:
            if self._shape is not None:
                self._frame = 0  # a new size: the encoder starts again
            self._shape, self._due = shape, True
        due = self._due or self._age + 1 >= REFRESH
        self._due, self._age = False, 0 if due else self._age + 1
        self._frame += 1
        return start_gain(self._frame - 1) if due else None


def chip_gain(chip_means: np.ndarray) -> np.ndarray:
    """Each chip's gain from the texture around it: its contrast with its neighbours, the least over an
    `ERODE` x `ERODE` square (float32, same shape)."""
    local = cv2.blur(chip_means, (3, 3), borderType=cv2.BORDER_REFLECT)
    contrast = cv2.blur(np.abs(chip_means - local), (3, 3), borderType=cv2.BORDER_REFLECT)
    contrast = cv2.erode(contrast, np.ones((ERODE, ERODE), np.uint8), borderType=cv2.BORDER_REFLECT)
    return np.clip(contrast * (1.0 / CONTRAST_REF), GAIN_FLAT, GAIN_BUSY).astype(np.float32)


def inner(rows: int, cols: int) -> np.ndarray:
    """The chips of the picture's inner part (bool, rows x columns): all but an `INNER` ring on each side.
    The embedder cancels the picture's projection there and in the ring apart, so a crop that cuts the ring
    keeps a cancelled mark."""
    core = np.zeros((rows, cols), bool)
    r, c = ring(rows, cols)
    core[r : rows - r, c : cols - c] = True
    return core


def ring(rows: int, cols: int) -> tuple[int, int]:
    """The ring's width in chips: rows at the top and at the bottom, columns at the left and at the right."""
    return round(INNER * rows), round(INNER * cols)


def high_passed(layers: np.ndarray) -> np.ndarray:
    """Each tile less its mean over 3 x 3 chips (wrapping, as the tile repeats): what the detector reads of
    it, without the blobs it whitens away (float32, same shape)."""
    out = np.empty(layers.shape, np.float32)
    for k, t in enumerate(layers.astype(np.float32)):
        out[k] = t - cv2.blur(t, (3, 3), borderType=cv2.BORDER_WRAP)
    return out


def tiled(tile: np.ndarray, rows: int, cols: int) -> np.ndarray:
    return np.tile(tile, (rows // TILE + 1, cols // TILE + 1))[:rows, :cols]


def spread(chips: np.ndarray, height: int, width: int) -> np.ndarray:
    """Chip values spread to pixels: bilinear between chip centres, square chips."""
    _, _, full = grid_shape(height, width)
    return cv2.resize(chips, (full, height), interpolation=cv2.INTER_LINEAR)[:, :width]


def _per_chip(values: np.ndarray, shape: tuple[int, int], mean: bool = False) -> np.ndarray:
    """Samples (SAMPLES per chip each way) gathered per chip, rows x columns: their sum, or their mean
    (`mean`; a chip the picture cuts takes its neighbour's); a chip the samples cut sums what it has."""
    rows, cols = shape
    sh, sw = values.shape
    padded = np.zeros((rows * SAMPLES, cols * SAMPLES), np.float32)
    padded[: min(sh, rows * SAMPLES), : min(sw, cols * SAMPLES)] = values[: rows * SAMPLES, : cols * SAMPLES]
    out = cv2.resize(padded, (cols, rows), interpolation=cv2.INTER_AREA)
    if not mean:
        return out * np.float32(SAMPLES * SAMPLES)
    rh, rw = min(rows, sh // SAMPLES), min(cols, sw // SAMPLES)
    if rw < cols:
        out[:, rw:] = out[:, rw - 1 : rw]
    if rh < rows:
        out[rh:] = out[rh - 1 : rh]
    return out


class Embedder:
    """Marks luma planes of any size with a set of layers and their nominal coefficients (`pattern.layers`,
    `pattern.coefficients`)."""

    def __init__(self, layers: np.ndarray, coefficients: np.ndarray, strength: float = STRENGTH) -> None:
        if layers.shape[1:] != (TILE, TILE):
            raise ValueError(f"layers {layers.shape} are not {TILE} x {TILE} tiles")
        self._layers = high_passed(layers)  # what is written; the detector reads along `layers`
        self._projectors = np.stack([response(t) for t in layers]).reshape(len(layers), -1)
        self._flat = self._layers.reshape(len(layers), -1)
        self._strength = strength
        self._transfer: dict[tuple[int, int], float] = {}
        self._schedule = Schedule()
        self._held: np.ndarray | None = None  # the change `mark` wrote last (`Schedule`: how long it stands)
        self.renew(coefficients)

    def renew(self, coefficients: np.ndarray) -> None:
        """New nominal coefficients for the same layers (the payload's time code turned): the layers' work
        is kept, the held change dropped (the next frame works its own out)."""
        if coefficients.shape != (len(self._layers),):
            raise ValueError(f"{len(self._layers)} layers and coefficients {coefficients.shape} do not match")
        self._coefficients = coefficients.astype(np.float32)
        self._limit = CANCEL_CAP * float(np.linalg.norm(self._coefficients))
        self._schedule.drop()

    def restart(self) -> None:
        """The encoder starts again on the next frame (a keyframe: a new viewer, a repair): the stronger
        start (`start_gain`) again, worked out on that frame."""
        self._schedule.restart()

    def transfer(self, height: int, width: int) -> float:
        """What one grey level of a layer's pattern adds to the detector's whitened samples along that
        pattern, per sample and per unit of weight (the bilinear spread and the whitening take some)."""
        key = (height, width)
        found = self._transfer.get(key)
        if found is None:
            rows, cols, _ = grid_shape(height, width)
            plane = spread(tiled(self._layers[0], rows, cols), height, width)
            s = sampled(plane, chip_size(height))
            local = cv2.blur(s, (2 * SAMPLES + 1, 2 * SAMPLES + 1), borderType=cv2.BORDER_REFLECT)
            along = float(np.dot(folded(s - local).reshape(-1), self._projectors[0]))
            found = along / s.size
            self._transfer = {key: found}
        return found

    def coefficients(self, samples: np.ndarray, gain: np.ndarray, height: int, width: int) -> np.ndarray:
        """This frame's layer coefficients in the inner part of the picture (`inner`) and in the ring around
        it (2 x layers): the nominal ones less each part's own projection (`gain`: each chip's)."""
        w, weight = whitened(samples)
        rows, cols = gain.shape
        r, c = ring(rows, cols)
        cut = np.zeros_like(w)  # the inner part's samples alone
        cut[r * SAMPLES : (rows - r) * SAMPLES, c * SAMPLES : (cols - c) * SAMPLES] = w[
            r * SAMPLES : (rows - r) * SAMPLES, c * SAMPLES : (cols - c) * SAMPLES
        ]
        host_in = self._projectors @ folded(cut).reshape(-1)
        hosts = (host_in, self._projectors @ folded(w).reshape(-1) - host_in)
        weighted = _per_chip(weight, gain.shape) * gain
        part_in = float(weighted[r : rows - r, c : cols - c].sum())
        parts = (part_in, float(weighted.sum()) - part_in)
        unit = self.transfer(height, width) * self._strength
        out = np.empty((2, len(host_in)), np.float32)
        for k in range(2):
            correction = hosts[k] * np.float32(-CANCEL / max(unit * parts[k], 1e-6))
            size = float(np.linalg.norm(correction))
            if size > self._limit:
                correction *= np.float32(self._limit / size)
            out[k] = self._coefficients + correction
        return out

    def chips(self, samples: np.ndarray, height: int, width: int, boost: float = 1.0) -> np.ndarray:
        """This frame's mark at the chips' resolution (rows x columns, float32 grey levels), from the
        picture's samples (`samples.sampled`): what the CPU and the device path share. `boost` scales the
        strength (`start_gain`), within the `MAX_RMS` cap."""
        rows, cols, _ = grid_shape(height, width)
        gain = chip_gain(_per_chip(samples, (rows, cols), mean=True))
        tiles = (self.coefficients(samples, gain, height, width) @ self._flat).reshape(2, TILE, TILE)
        r, c = ring(rows, cols)
        chips = tiled(tiles[1], rows, cols) * gain
        chips[r : rows - r, c : cols - c] = (tiled(tiles[0], rows, cols) * gain)[r : rows - r, c : cols - c]
        rms = float(np.sqrt(np.vdot(chips, chips) / chips.size)) * self._strength
        limit = MAX_RMS / SPREAD_RMS
        scale = min(self._strength * boost, self._strength * limit / rms)  # a busy picture everywhere:
        chips *= np.float32(scale)  # the gains scaled down together, PSNR kept
        return chips.astype(np.float32, copy=False)

    def delta(self, luma: np.ndarray, boost: float = 1.0) -> np.ndarray:
        """The change the mark makes to this luma plane (float32, before rounding and saturation)."""
        height, width = luma.shape
        return spread(self.chips(sampled(luma, chip_size(height)), height, width, boost), height, width)

    def mark(self, luma: np.ndarray) -> None:
        """Write the mark into `luma` (uint8, H x W; a view of a frame's Y plane is written in place): the
        change worked out on this frame, or between refreshes the one held from the frame before (a stream's
        next frame differs little, and the encoders see a mark that stands still)."""
        boost = self._schedule.next(luma.shape)
        if boost is not None:
            self._held = self.delta(luma, boost)
        held = self._held
        assert held is not None  # the schedule works the first frame's change out
        out = cv2.add(luma, held, dst=luma, dtype=cv2.CV_8U)
        if not np.may_share_memory(out, luma):  # OpenCV wrote elsewhere (a view it could not take)
            np.copyto(luma, out)
