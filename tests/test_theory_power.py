"""Paired intervals over seeds and over problems, and the power of a paired comparison."""

from __future__ import annotations

import numpy as np
import pytest

from councilzoo.theory.stats import paired_cis, paired_power, seeds_for_power, standardised_effect, t_interval


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
    """Simulated coverage of the seed-level interval, at least 93% of 4,000 draws: each unit is a
    training run whose true accuracy varies between runs (sd 0.05, the between-run spread of a
    real run) and is measured on 96 items, so unit values carry both levels of noise."""
    rng = np.random.default_rng(units)
    p = np.clip(rng.normal(0.5, 0.05, size=(4000, units)), 0, 1)
    values = rng.binomial(96, p) / 96
    hits = sum(lo <= 0.5 <= hi for _, lo, hi in map(t_interval, values))
    assert hits / 4000 >= 0.93, (units, hits / 4000)


def test_t_interval_refuses_fewer_than_two_units():
    with pytest.raises(ValueError, match="at least 2 units"):
        t_interval([0.1])
    assert t_interval([0.2, 0.2]) == (0.2, 0.2, 0.2)
