"""Percentiles of measured samples, computed one way for every report and benchmark: numpy's linear
interpolation (the median of an even count is the mean of its middle two). Report keys and their rounding
stay with each report; `summary` builds the usual {name: rounded statistic} dict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

Samples = Sequence[float] | np.ndarray
Statistic = float | Literal["mean", "max"]  # a percentile 0..100, or the samples' mean or largest


def percentiles(values: Samples, qs: Sequence[float]) -> list[float]:
    """The `qs`-th percentiles (0..100) of non-empty `values`."""
    if len(values) == 0:
        raise ValueError("no samples")
    return [float(p) for p in np.percentile(np.asarray(values, dtype=np.float64), qs)]


def percentile(values: Samples, q: float) -> float:
    return percentiles(values, (q,))[0]


def summary(values: Samples, fields: Mapping[str, Statistic], digits: int) -> dict[str, float]:
    """{name: statistic of non-empty `values` rounded to `digits`}, in the order of `fields`."""
    arr = np.asarray(values, dtype=np.float64)
    qs = [q for q in fields.values() if not isinstance(q, str)]
    by_q = dict(zip(qs, percentiles(arr, qs), strict=True))
    plain = {"mean": float(arr.mean()), "max": float(arr.max())}
    return {name: round(plain[q] if isinstance(q, str) else by_q[q], digits) for name, q in fields.items()}
