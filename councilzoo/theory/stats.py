"""Bootstrap confidence intervals (Efron 1979; percentile method), seeded and vectorised, and the
power of a paired comparison.

The evaluation harness uses these for accuracy and rescue/harm intervals. Resampling draws the
same number of items with replacement; the interval is the ``(1 - level) / 2`` and
``(1 + level) / 2`` quantiles of the statistic over ``n_boot`` resamples.

Paired comparisons (``paired_cis``): two arms measured on the same seeds and the same problems
give a (seeds x problems) matrix of differences; resampling its rows (seeds) and its columns
(problems) answers two different questions (would another seed, or another draw of problems,
give the same difference?), so the two intervals are reported separately. With 3 seeds a
percentile interval over seeds is in effect the smallest and largest seed's value: use 8 or more.

Power (``paired_power``, ``seeds_for_power``): a paired two-sided t-test at ``alpha`` stands in for
the bootstrap interval; with standardised effect ``d`` (mean difference over its standard
deviation) and ``n`` pairs, power = P(|T| > t_{1 - alpha/2, n-1}) for T noncentral t with n - 1
degrees of freedom and noncentrality ``d sqrt(n)`` (exact, ``scipy.stats.nct``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["bootstrap_indices", "percentile_interval", "bootstrap_ci", "mean_ci", "t_interval"]


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


def t_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """``(mean, lo, hi)``: Student's t interval of the mean of ``values`` (one value per unit).

    The interval for few independent units, such as training runs (seeds) or paired seed
    differences: unlike a percentile bootstrap over 3 to 8 values, which is too narrow, it keeps
    its nominal coverage for normal-ish unit values at any count >= 2 (tests/test_stats.py
    simulates it). With zero spread the interval is the mean itself.
    """
    from scipy import stats

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or len(values) < 2:
        raise ValueError(f"a t interval needs a 1-D sample of at least 2 units, got shape {values.shape}")
    mean = float(values.mean())
    half = float(stats.t.ppf((1 + level) / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))
    return mean, mean - half, mean + half


def paired_cis(
    a, b, n_boot: int = 2000, level: float = 0.95, seed: int | np.random.Generator = 0
) -> dict[str, tuple[float, float] | float]:
    """Mean of ``a - b`` and its percentile intervals over seeds and over problems, separately.

    ``a`` and ``b``: (seeds, problems) arrays of a per-problem metric (1-D: one value per seed),
    the same seeds and problems in both arms. Over seeds, each resample draws seeds with
    replacement and averages their per-seed means; over problems, it draws problems and
    averages over all seeds. ``"over_problems"`` is None for 1-D inputs.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim not in (1, 2):
        raise ValueError(f"a and b must be paired (seeds,) or (seeds, problems) arrays, got {a.shape} and "
                         f"{b.shape}")
    diff = a - b if a.ndim == 2 else (a - b)[:, None]
    rng = np.random.default_rng(seed)
    over_seeds = bootstrap_ci(diff.mean(axis=1), n_boot=n_boot, level=level, seed=rng)
    over_problems = (None if a.ndim == 1
                     else bootstrap_ci(diff.mean(axis=0), n_boot=n_boot, level=level, seed=rng))
    return {"mean": float(diff.mean()), "over_seeds": over_seeds, "over_problems": over_problems}


def paired_power(d: float, n: int, alpha: float = 0.05) -> float:
    """Power of a two-sided paired t-test with ``n`` pairs at standardised effect ``d``."""
    from scipy import stats

    if n < 2:
        raise ValueError(f"a paired test needs n >= 2 pairs, got {n}")
    df = n - 1
    crit = stats.t.ppf(1 - alpha / 2, df)
    nc = d * np.sqrt(n)
    lower = stats.nct.cdf(-crit, df, nc)  # scipy gives NaN where this tail underflows
    return float(stats.nct.sf(crit, df, nc) + (0.0 if np.isnan(lower) else lower))


def seeds_for_power(d: float, power: float = 0.8, alpha: float = 0.05, max_n: int = 10_000) -> int | None:
    """The fewest pairs (seeds) giving ``power`` at effect ``d``; None if more than ``max_n``."""
    if d == 0:
        return None
    for n in range(2, max_n + 1):
        if paired_power(abs(d), n, alpha) >= power:
            return n
    return None


def standardised_effect(values, threshold: float = 0.0) -> float:
    """A pilot's ``(mean - threshold) / sd`` (sample sd, ddof 1): the ``d`` of ``paired_power``."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) < 2:
        raise ValueError(f"a pilot needs at least 2 values for its spread, got {len(values)}")
    sd = values.std(ddof=1)
    return float("inf") if sd == 0 else float((values.mean() - threshold) / sd)
