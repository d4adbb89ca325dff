"""How long will a batch of n frames take? Pure bookkeeping over measured batch times.

The scheduler must predict before it runs a batch (to reject frames that cannot make their deadline and to
shrink a batch that would make one late): per batch size an exponentially weighted average of measured
times, and a weighted least-squares line cost(b) = a + c*b for sizes not measured yet. Before any
measurement the estimate is the prior (0: a cold scheduler drops nothing on a guess); with one measured size,
other sizes are extrapolated pessimistically. No clocks, no threads.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EstimatorConfig:
    alpha: float = 0.2  # EWMA weight of the newest measurement
    prior_ms: float = 0.0  # estimate for any size before the first measurement
    max_weight: int = 20  # a size's weight in the linear fit saturates at this many measurements

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha}")
        if self.prior_ms < 0.0:
            raise ValueError(f"prior_ms must be >= 0, got {self.prior_ms}")
        if self.max_weight < 1:
            raise ValueError(f"max_weight must be >= 1, got {self.max_weight}")


@dataclass
class _SizeStats:
    ewma_ms: float
    count: int


class BatchTimeEstimator:
    """Per-batch-size EWMA of measured batch times, plus a linear fit to fill unmeasured sizes."""

    def __init__(self, config: EstimatorConfig | None = None) -> None:
        self._config = config or EstimatorConfig()
        self._sizes: dict[int, _SizeStats] = {}

    def observe(self, batch_size: int, elapsed_ms: float) -> None:
        """Record one measured batch. Negative times (clock trouble) are clamped to zero, not trusted."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        ms = max(0.0, float(elapsed_ms))
        stats = self._sizes.get(batch_size)
        if stats is None:
            self._sizes[batch_size] = _SizeStats(ewma_ms=ms, count=1)
            return
        a = self._config.alpha
        stats.ewma_ms = a * ms + (1.0 - a) * stats.ewma_ms
        stats.count += 1

    @property
    def measured(self) -> bool:
        return bool(self._sizes)

    def measurements(self, batch_size: int) -> int:
        stats = self._sizes.get(batch_size)
        return stats.count if stats else 0

    def fit(self) -> tuple[float, float] | None:
        """(a, c) of `cost(b) = a + c*b` by weighted least squares, or None with fewer than two sizes.

        Both coefficients are clamped to >= 0: a negative slope or intercept is noise, and a prediction that
        bigger batches are cheaper would make the deadline check wave through frames it should not.
        """
        if len(self._sizes) < 2:
            return None
        cap = self._config.max_weight
        pts = [(float(b), s.ewma_ms, float(min(s.count, cap))) for b, s in self._sizes.items()]
        w_sum = sum(w for _, _, w in pts)
        x_mean = sum(w * x for x, _, w in pts) / w_sum
        y_mean = sum(w * y for _, y, w in pts) / w_sum
        sxx = sum(w * (x - x_mean) ** 2 for x, _, w in pts)
        sxy = sum(w * (x - x_mean) * (y - y_mean) for x, y, w in pts)
        slope = max(0.0, sxy / sxx) if sxx > 0 else 0.0
        intercept = y_mean - slope * x_mean
        if intercept < 0.0:
            # Refit through the origin rather than keep a negative fixed cost.
            sxx0 = sum(w * x * x for x, _, w in pts)
            slope = max(0.0, sum(w * x * y for x, y, w in pts) / sxx0)
            intercept = 0.0
        return intercept, slope

    def predict_ms(self, batch_size: int) -> float:
        """Expected time of one batch of `batch_size` items."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not self._sizes:
            return self._config.prior_ms
        own = self._sizes.get(batch_size)
        if own is not None:
            return own.ewma_ms
        if len(self._sizes) == 1:
            ((b0, s0),) = self._sizes.items()
            return s0.ewma_ms * batch_size / b0 if batch_size > b0 else s0.ewma_ms
        line = self.fit()
        assert line is not None
        a, c = line
        estimate = a + c * batch_size
        # Never predict a larger batch cheaper than a smaller one that was actually measured.
        smaller = [s.ewma_ms for b, s in self._sizes.items() if b < batch_size]
        if smaller:
            estimate = max(estimate, max(smaller))
        return max(0.0, estimate)

    def snapshot(self) -> dict[str, float]:
        """Flat numbers for stats exporters: per measured size its EWMA, and the fitted line."""
        out: dict[str, float] = {f"est_batch{b}_ms": s.ewma_ms for b, s in sorted(self._sizes.items())}
        line = self.fit()
        if line is not None:
            out["est_fixed_ms"], out["est_per_item_ms"] = line
        return out
