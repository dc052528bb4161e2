"""Bootstrap confidence intervals (Efron 1979; percentile method), seeded and vectorised.

The evaluation harness uses these for accuracy and rescue/harm intervals. Resampling draws the
same number of items with replacement; the interval is the ``(1 - level) / 2`` and
``(1 + level) / 2`` quantiles of the statistic over ``n_boot`` resamples.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["bootstrap_indices", "percentile_interval", "bootstrap_ci", "mean_ci"]


def bootstrap_indices(n: int, n_boot: int, seed: int | np.random.Generator) -> np.ndarray:
    """``(n_boot, n)`` item indices drawn with replacement; shared so paired statistics align."""
    if n < 1:
        raise ValueError("bootstrap needs at least one value, got an empty sample")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    return np.random.default_rng(seed).integers(n, size=(n_boot, n), dtype=np.int32)


def percentile_interval(samples: np.ndarray, level: float) -> tuple[float, float]:
    """The central ``level`` interval of bootstrap ``samples``."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    lo, hi = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def bootstrap_ci(
    values,
    stat: Callable[..., np.ndarray] = np.mean,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat(values)``.

    ``stat`` must reduce along an ``axis`` keyword like the numpy reductions (``np.mean``,
    ``np.median``, ``np.std``); it is called once on all resamples with ``axis=1``.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"values must be 1-D, got shape {values.shape}")
    resamples = values[bootstrap_indices(len(values), n_boot, seed)]
    return percentile_interval(stat(resamples, axis=1), level)


def mean_ci(
    values, n_boot: int = 1000, level: float = 0.95, seed: int | np.random.Generator = 0
) -> tuple[float, float, float]:
    """``(mean, lo, hi)``: the sample mean and its percentile bootstrap interval."""
    values = np.asarray(values, dtype=np.float64)
    lo, hi = bootstrap_ci(values, np.mean, n_boot=n_boot, level=level, seed=seed)
    return float(values.mean()), lo, hi
