"""Finding the mark: a search over chip sizes and tile shifts by normalised correlation, then the payload's
bits at the alignment found.

Per candidate chip size the luma is read as the embedder reads it (`samples`: sampled, whitened, folded onto
the tile) and circularly correlated with the public tile (one small FFT). Two tests, either of which finds
the mark: the z-score at the one alignment where the gateway wrote it (chips per height as embedded, the tile
at the corner: what a rescale or a transcode keeps), from `NOMINAL_THRESHOLD`; else, for crops, the best of
the search over chip sizes (down to `MIN_VISIBLE` of the height) and shifts, from `THRESHOLD`, set above
what unmarked video reaches (bench.mark measures both; docs/BENCHMARKS.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engines.marking.pattern import CHIPS_PER_HEIGHT, TILE, Payload, decode_payload, layers, read_payload
from engines.marking.samples import folded as fold_samples
from engines.marking.samples import response, sampled, whitened

NOMINAL_THRESHOLD = 4.75  # the same at the mark's own alignment (one hypothesis, no search): z, in sd
THRESHOLD = 6.0  # a window's (or frame's) score for "marked" (bench.mark: unmarked video stays below)
MIN_VISIBLE = 0.75  # the smallest fraction of the picture's height a crop may keep and still be searched
SCALE_STEP = 1.008  # between chip sizes searched (a tile's worth of drift stays under half a chip)


@dataclass(frozen=True)
class Alignment:
    """Where the tile sits: the chip size (pixels) and the tile's shift (in samples) at it."""

    chip_px: float
    shift: tuple[int, int]
    score: float


@dataclass(frozen=True)
class WindowResult:
    """One window of frames: the public layer's score and alignment (`nominal`: its z where the gateway put
    it; `score`: the best of the search, or at the nominal alignment where that sufficed), each frame's z at
    that alignment (marked from NOMINAL_THRESHOLD), and the payload where a key was given and its check
    passed."""

    score: float
    detected: bool
    alignment: Alignment
    nominal: float
    frame_scores: tuple[float, ...]
    payload: Payload | None
    payloads: tuple[Payload, ...] = ()  # each distinct payload read (two where the time code turned)


def combining_weights(frame_scores: Sequence[float]) -> np.ndarray:
    """Each frame's weight in the window's payload sum: its public z at the window's alignment (none below
    zero), so a frame that carries little of the mark (an encoder's first frames after a keyframe) adds
    little of its noise (maximal-ratio combining: the weight follows each frame's signal to noise). Equal
    weights where no frame scores."""
    weights = np.clip(np.asarray(frame_scores, np.float32), 0.0, None)
    return weights if float(weights.sum()) > 0 else np.ones(len(weights), np.float32)


class Detector:
    """Scores frames and windows for the public layer, and reads the payload with a key."""

    def __init__(self, key: bytes | None = None, min_visible: float = MIN_VISIBLE) -> None:
        found = layers(key)
        self._key = key
        self._public = response(found.public)
        self._public_f = np.conj(np.fft.rfft2(self._public))
        self._public_norm = float(np.sqrt(np.sum(self._public.astype(np.float64) ** 2)))
        self._bits = None if found.payload is None else np.stack([response(p) for p in found.payload])
        n = max(1, math.ceil(math.log(1.0 / min_visible) / math.log(SCALE_STEP)))
        self._visible = tuple(SCALE_STEP**-i for i in range(n + 1))

    def chip_sizes(self, height: int) -> tuple[float, ...]:
        """The chip sizes searched on a picture of this height (largest first: uncropped)."""
        return tuple(height / (CHIPS_PER_HEIGHT * f) for f in self._visible)

    def _surface(self, folded: np.ndarray) -> np.ndarray:
        return np.fft.irfft2(np.fft.rfft2(folded) * self._public_f, s=folded.shape)

    def _score(self, surface: np.ndarray, folded: np.ndarray) -> tuple[float, tuple[int, int]]:
        """The peak as a normalised correlation times the root of the tile's chips: under no mark about
        a standard normal per shift, whatever the picture (the whitening makes the samples near white)."""
        flat = surface.reshape(-1)
        k = int(np.argmax(flat))
        norm = float(np.sqrt(np.sum(folded.astype(np.float64) ** 2))) * self._public_norm
        score = float(flat[k]) / norm * TILE if norm > 0 else 0.0
        return score, divmod(k, surface.shape[1])

    def folded(self, luma: np.ndarray, chip_px: float) -> np.ndarray:
        """One picture's whitened samples folded onto the tile, at a chip size."""
        return fold_samples(whitened(sampled(luma, chip_px))[0])

    def search(self, luma: np.ndarray) -> Alignment:
        """The best chip size and shift for one (averaged) luma plane."""
        best = Alignment(0.0, (0, 0), -math.inf)
        for chip_px in self.chip_sizes(luma.shape[0]):
            folded = self.folded(luma, chip_px)
            score, shift = self._score(self._surface(folded), folded)
            if score > best.score:
                best = Alignment(chip_px, shift, score)
        return best

    @staticmethod
    def _z_at(surface: np.ndarray, shift: tuple[int, int]) -> float:
        """The surface's value at one shift in standard deviations of the whole surface."""
        sd = float(surface.std())
        return (float(surface[shift]) - float(surface.mean())) / sd if sd > 0 else 0.0

    def nominal(self, luma: np.ndarray) -> float:
        """The public layer's z at the alignment the gateway wrote it (chips per height as embedded, the
        tile at the picture's corner): what a rescale or a transcode keeps. One hypothesis, so a lower bar
        (`NOMINAL_THRESHOLD`) holds the same false-positive rate as the search's."""
        return self._z_at(self._surface(self.folded(luma, luma.shape[0] / CHIPS_PER_HEIGHT)), (0, 0))

    def frame_score(self, luma: np.ndarray, chip_px: float) -> float:
        folded = self.folded(luma, chip_px)
        return self._score(self._surface(folded), folded)[0]

    def soft_bits(self, folded: np.ndarray, shift: tuple[int, int]) -> np.ndarray:
        """The payload's soft bits from a folded picture aligned by the public layer's shift."""
        if self._bits is None:
            raise ValueError("reading the payload needs the key")
        aligned = np.roll(folded, (-shift[0], -shift[1]), axis=(0, 1))
        return np.tensordot(self._bits, aligned, axes=([1, 2], [0, 1]))

    def window(self, lumas: Sequence[np.ndarray]) -> WindowResult:
        """One window of equal-sized luma planes (a second of video): the public layer searched on their
        mean (the mark stays, the picture moves), each frame scored at what was found, and with the key the
        payload, read from every frame's bits summed, each weighted by its score (`combining_weights`; or,
        where the time code turned inside the window, from the frames on each side of the turn)."""
        if not lumas:
            raise ValueError("an empty window")
        mean = np.mean(np.stack([np.asarray(y, np.float32) for y in lumas]), axis=0)
        nominal = self.nominal(mean)
        if nominal >= NOMINAL_THRESHOLD:
            chip_px = mean.shape[0] / CHIPS_PER_HEIGHT
            folded = self.folded(mean, chip_px)
            found = Alignment(chip_px, (0, 0), self._score(self._surface(folded), folded)[0])
        else:
            found = self.search(mean)
        folds = [self.folded(y, found.chip_px) for y in lumas]
        # each frame at the window's alignment: one hypothesis, NOMINAL_THRESHOLD's scale
        frame_scores = tuple(self._z_at(self._surface(f), found.shift) for f in folds)
        detected = nominal >= NOMINAL_THRESHOLD or found.score >= THRESHOLD
        payloads: tuple[Payload, ...] = ()
        if self._key is not None and detected:
            soft = np.stack([self.soft_bits(f, found.shift) for f in folds])
            payloads = self._read(soft * combining_weights(frame_scores)[:, None])
        return WindowResult(
            found.score, detected, found, nominal, frame_scores, payloads[0] if payloads else None, payloads
        )

    def _read(self, soft: np.ndarray) -> tuple[Payload, ...]:
        """The window's payloads from each frame's soft bits: where the time code turned inside the window,
        the two read on each side of the turn; else all frames summed, read as they are or with the weakest
        bits corrected (`pattern.decode_payload`); else what one side of a split reads."""
        assert self._key is not None
        sums = np.cumsum(soft, axis=0)
        total = sums[-1]
        single: Payload | None = None
        for k in range(1, soft.shape[0]):  # the payload changed after frame k - 1
            before = read_payload(self._key, sums[k - 1])
            after = read_payload(self._key, total - sums[k - 1])
            if before is not None and after is not None and before != after:
                return (before, after)
            single = single or before or after
        whole = read_payload(self._key, total) or decode_payload(self._key, total)
        if whole is not None:
            return (whole,)
        return (single,) if single is not None else ()
