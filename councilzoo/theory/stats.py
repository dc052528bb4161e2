"""Confidence intervals over items and over training runs (seeds), and the power of a paired
comparison.

The unit of inference is the training run wherever runs are trained: a verdict rests on an
interval over seeds (``t_interval`` of per-seed values or paired per-seed differences, or
``cluster_interval`` where runs and items both vary); intervals over items are secondary. A
percentile bootstrap over 3 to 8 seeds is too narrow (it covers about 75% at 3 seeds, 89% at 8);
both seed-level intervals here keep their nominal coverage, which tests/test_theory_power.py
simulates at 3, 8 and 16 units.

Over items (``bootstrap_ci``, ``mean_ci``: percentile method, Efron 1979; seeded, vectorised), the
evaluation harness reports accuracy and rescue/harm intervals. Resampling draws the
same number of items with replacement; the interval is the ``(1 - level) / 2`` and
``(1 + level) / 2`` quantiles of the statistic over ``n_boot`` resamples.

Paired comparisons (``paired_cis``): two arms measured on the same seeds and the same problems
give a (seeds x problems) matrix of differences; its rows (seeds) and its columns (problems)
answer two different questions (would another training run, or another draw of problems, give
the same difference?), so the two intervals are reported separately.

Power (``paired_power``, ``seeds_for_power``): a paired two-sided t-test at ``alpha``, the test of
the seed-level t interval; with standardised effect ``d`` (mean difference over its standard
deviation) and ``n`` pairs, power = P(|T| > t_{1 - alpha/2, n-1}) for T noncentral t with n - 1
degrees of freedom and noncentrality ``d sqrt(n)`` (exact, ``scipy.stats.nct``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = [
    "bootstrap_indices", "percentile_interval", "bootstrap_ci", "mean_ci", "t_interval", "seed_interval",
    "cluster_interval",
]


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
    its nominal coverage for normal-ish unit values at any count >= 2
    (tests/test_theory_power.py simulates it). With zero spread the interval is the mean itself.
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


def seed_interval(values, level: float = 0.95) -> list[float | None]:
    """``[mean, lo, hi]`` over seeds by ``t_interval``; ``[mean, None, None]`` for a single seed,
    where no interval can be computed (a report then shows none, and a check on it decides
    nothing)."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if len(values) == 1:
        return [float(values[0]), None, None]
    return list(t_interval(values, level))


def cluster_interval(
    values, *, items_shared: bool, level: float = 0.95, n_boot: int = 2000,
    seed: int | np.random.Generator = 0,
) -> tuple[float, float, float]:
    """``(mean, lo, hi)`` of the grand mean of a (seeds, items) array where runs and items both vary.

    A two-level bootstrap gives the standard error; the interval is the mean -/+ Student's t
    quantile with seeds - 1 degrees of freedom times it, because with few seeds a percentile
    interval of the resamples is too narrow. Its two levels follow the design:

    - ``items_shared=False``: each seed has its own draw of items (nested). Seeds are drawn with
      replacement and each keeps its items: redrawing items inside a seed too would count their
      noise twice, which is already in the spread of the seed means (Davison and Hinkley 1997,
      section 3.8); the variance is scaled by seeds / (seeds - 1), the bootstrap's bias.
    - ``items_shared=True``: every seed is scored on the same items (crossed). Seeds and items are
      drawn with replacement independently, one item draw for all seeds (Owen 2007), so an item
      that is hard for every run counts as one item, not as one per seed. This counts the
      seed-by-item noise twice, so the interval is conservative (its simulated coverage at 8
      seeds is about 99%).

    Pass paired differences (arm a minus arm b, the same seeds and items) for a paired comparison.
    """
    from scipy import stats

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] < 2 or values.shape[1] < 1:
        raise ValueError(f"a cluster interval needs a (seeds, items) array with at least 2 seeds, got shape "
                         f"{values.shape}")
    n_seeds, n_items = values.shape
    rng = np.random.default_rng(seed)
    seeds = rng.integers(n_seeds, size=(n_boot, n_seeds, 1))
    if items_shared:
        items = rng.integers(n_items, size=(n_boot, 1, n_items))
    else:
        items = np.arange(n_items)[None, None, :]
    se = float(values[seeds, items].mean(axis=(1, 2)).std(ddof=1))
    if not items_shared:
        se *= np.sqrt(n_seeds / (n_seeds - 1))  # a bootstrap over n clusters underestimates by (n-1)/n
    mean = float(values.mean())
    half = float(stats.t.ppf((1 + level) / 2, n_seeds - 1)) * se
    return mean, mean - half, mean + half


def paired_cis(
    a, b, n_boot: int = 2000, level: float = 0.95, seed: int | np.random.Generator = 0
) -> dict[str, tuple[float, float] | float | None]:
    """Mean of ``a - b`` and its intervals over seeds and over problems, separately.

    ``a`` and ``b``: (seeds, problems) arrays of a per-problem metric (1-D: one value per seed),
    the same seeds and problems in both arms. Over seeds (the unit of inference): ``t_interval`` of
    the per-seed mean differences, None with one seed. Over problems (secondary: would another draw
    of problems give the same difference?): a percentile bootstrap of the per-problem differences
    averaged over seeds, None for 1-D inputs.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim not in (1, 2):
        raise ValueError(f"a and b must be paired (seeds,) or (seeds, problems) arrays, got {a.shape} and "
                         f"{b.shape}")
    diff = a - b if a.ndim == 2 else (a - b)[:, None]
    over_seeds = None if len(diff) < 2 else t_interval(diff.mean(axis=1), level)[1:]
    over_problems = (None if a.ndim == 1
                     else bootstrap_ci(diff.mean(axis=0), n_boot=n_boot, level=level, seed=seed))
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
