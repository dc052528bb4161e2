"""Paired intervals over seeds and over problems, and the power of a paired comparison."""

from __future__ import annotations

import numpy as np
import pytest

from councilzoo.theory.stats import (
    cluster_interval,
    paired_cis,
    paired_power,
    seed_interval,
    seeds_for_power,
    standardised_effect,
    t_interval,
)


def test_paired_power_matches_the_textbook_values():
    assert paired_power(0.0, 10) == pytest.approx(0.05)  # no effect: the test's size
    assert paired_power(0.5, 34) == pytest.approx(0.8078, abs=1e-4)  # G*Power, paired t, two tails
    assert seeds_for_power(0.5) == 34 and seeds_for_power(-0.5) == 34
    assert seeds_for_power(0.61) == 24  # TRACER's utterance pilot (docs/reproductions.md)
    assert paired_power(0.61, 5) == pytest.approx(0.185, abs=1e-3)
    assert seeds_for_power(0.0) is None
    assert paired_power(4.08, 8) == pytest.approx(1.0)  # a far tail that underflows in scipy
    with pytest.raises(ValueError, match="n >= 2"):
        paired_power(0.5, 1)


def test_paired_power_agrees_with_simulated_t_tests():
    from scipy import stats

    rng = np.random.default_rng(0)
    diffs = rng.normal(0.7, 1.0, size=(20_000, 8))
    rejected = stats.ttest_1samp(diffs, 0.0, axis=1).pvalue < 0.05
    assert rejected.mean() == pytest.approx(paired_power(0.7, 8), abs=0.01)


def test_paired_cis_separate_seed_noise_from_problem_noise():
    rng = np.random.default_rng(1)
    seeds, problems = 8, 400
    # arm a is 0.1 better on every problem; each seed shifts both arms alike (paired), and the
    # per-problem noise is large, so problems, not seeds, carry the uncertainty
    shift = rng.normal(0, 1.0, size=(seeds, 1))
    b = shift + rng.normal(0, 1.0, size=(seeds, problems))
    a = b + 0.1 + rng.normal(0, 0.5, size=(seeds, problems))
    out = paired_cis(a, b)
    assert out["mean"] == pytest.approx(0.1, abs=0.02)
    lo_s, hi_s = out["over_seeds"]
    lo_p, hi_p = out["over_problems"]
    assert lo_s < 0.1 < hi_s and lo_p < 0.1 < hi_p
    assert paired_cis(a[:, 0], b[:, 0])["over_problems"] is None  # one value per seed
    with pytest.raises(ValueError, match="paired"):
        paired_cis(a, b[:, :10])


def test_standardised_effect_of_a_pilot():
    assert standardised_effect([0.1, 0.3], threshold=0.0) == pytest.approx(0.2 / np.std([0.1, 0.3], ddof=1))
    assert standardised_effect([0.03, 0.05, 0.04], threshold=0.02) > 0
    with pytest.raises(ValueError, match="at least 2"):
        standardised_effect([0.1])


@pytest.mark.parametrize("units", [3, 8, 16])
def test_t_interval_over_seeds_keeps_its_coverage(units):
    """Simulated coverage of the seed-level interval over 4,000 draws of normal seed values with the
    between-run spread of a real run (sd 0.05): at least 93% (the exact value is 95%). A strongly
    skewed spread (exponential, skewness 2) leaves the t interval short at few seeds, measured
    about 90% at 3 and 8 seeds and 92% at 16: it must stay above 87%."""
    rng = np.random.default_rng(units)
    draws = {0.93: lambda n: rng.normal(0.02, 0.05, n),
             0.87: lambda n: rng.exponential(0.05, n) - 0.05 + 0.02}
    for floor, draw in draws.items():
        hits = 0
        for _ in range(4000):
            _, lo, hi = t_interval(draw(units))
            hits += lo <= 0.02 <= hi
        assert hits / 4000 >= floor, (units, floor, hits / 4000)


def test_t_interval_refuses_fewer_than_two_units():
    with pytest.raises(ValueError, match="at least 2 units"):
        t_interval([0.1])
    assert t_interval([0.2, 0.2]) == (0.2, 0.2, 0.2)


def test_seed_interval_shows_no_interval_for_one_seed():
    assert seed_interval([0.3]) == [0.3, None, None]
    mean, lo, hi = seed_interval([0.1, 0.2, 0.3])
    assert (mean, lo, hi) == pytest.approx(t_interval([0.1, 0.2, 0.3]))


@pytest.mark.parametrize("seeds", [3, 8, 16])
@pytest.mark.parametrize("items_shared", [False, True])
def test_cluster_interval_keeps_its_coverage_where_runs_and_items_both_vary(seeds, items_shared):
    """Simulated coverage of the two-level interval: paired differences with a between-run spread
    (sd 0.05 around +0.02), per-item noise (sd 0.4) and, where every seed is scored on the same
    items, an item effect shared by all seeds (sd 0.2); at least 93% of 1,000 draws hold the truth
    at 8 and 16 seeds (90% at 3)."""
    rng = np.random.default_rng(seeds + 100 * items_shared)
    hits = 0
    for _ in range(1000):
        shift = rng.normal(0.02, 0.05, (seeds, 1))
        item = rng.normal(0, 0.2, (1, 20)) if items_shared else 0.0
        diffs = shift + item + rng.normal(0, 0.4, (seeds, 20))
        _, lo, hi = cluster_interval(diffs, items_shared=items_shared, n_boot=500, seed=rng)
        hits += lo <= 0.02 <= hi
    assert hits / 1000 >= (0.93 if seeds >= 8 else 0.90), (seeds, items_shared, hits / 1000)


def test_cluster_interval_refuses_a_single_seed():
    with pytest.raises(ValueError, match="at least 2 seeds"):
        cluster_interval(np.zeros((1, 5)), items_shared=False)


def test_paired_cis_over_seeds_is_the_t_interval_of_seed_differences():
    a, b = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]), np.zeros((3, 2))
    assert paired_cis(a, b)["over_seeds"] == pytest.approx(t_interval(a.mean(axis=1))[1:])
    assert paired_cis(a[:1], b[:1])["over_seeds"] is None
