"""Rescue-harm identity (exact, in counts), the oracle gate, and bootstrap intervals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from councilzoo.theory import bootstrap_ci, mean_ci, rescue_harm

item = st.tuples(st.integers(0, 1), st.one_of(st.none(), st.integers(0, 1)), st.integers(0, 1)).map(
    lambda t: (t[0], t[1], 0 if t[1] is None else t[2]))  # escalation needs a known Y_c


@given(items=st.lists(item, min_size=1, max_size=60))
def test_rescue_minus_harm_is_accuracy_change(items):
    anchor, collab, escalated = map(list, zip(*items, strict=True))
    r = rescue_harm(anchor, collab, escalated, n_boot=50)
    n = len(items)
    assert r.counts["rescue"] - r.counts["harm"] == r.counts["accuracy"] - r.counts["anchor_accuracy"]
    assert r.net == pytest.approx(r.accuracy - r.anchor_accuracy, abs=1e-12)
    # Brute force, item by item.
    final = [c if e else a for a, c, e in items]
    assert r.counts["accuracy"] == sum(final)
    assert r.counts["rescue"] == sum(1 for a, c, e in items if e and not a and c)
    assert r.counts["harm"] == sum(1 for a, c, e in items if e and a and c == 0)
    assert r.escalation_rate == sum(escalated) / n
    # The oracle gate is the best gate on the known outcomes.
    assert r.oracle_gate_accuracy >= max(r.accuracy, r.anchor_accuracy)
    oracle = [int(c is not None and not a and c) for a, c, _ in items]
    r_oracle = rescue_harm(anchor, collab, oracle, n_boot=50)
    assert r_oracle.harm == 0.0 and r_oracle.accuracy == r.oracle_gate_accuracy
    for name, (lo, hi) in r.ci.items():
        assert lo <= hi and -1.0 <= lo and hi <= 1.0, name


def test_rescue_harm_rejects_bad_input():
    with pytest.raises(ValueError, match="escalated items \\[1\\]"):
        rescue_harm([1, 0], [1, None], [0, 1])
    with pytest.raises(ValueError, match="0/1"):
        rescue_harm([1, 2], [1, 1], [0, 1])
    with pytest.raises(ValueError, match="length"):
        rescue_harm([1, 0], [1], [0, 1])
    with pytest.raises(ValueError, match="at least one"):
        rescue_harm([], [], [])


def test_rescue_harm_intervals_are_seeded_and_paired():
    rng = np.random.default_rng(0)
    anchor, collab, esc = (rng.integers(0, 2, 300) for _ in range(3))
    a = rescue_harm(anchor, collab, esc, seed=3)
    assert a == rescue_harm(anchor, collab, esc, seed=3)
    assert a.ci["net"][0] <= a.net <= a.ci["net"][1]


def test_bootstrap_ci_coverage_and_determinism():
    """Percentile intervals of a Bernoulli(0.3) mean cover 0.3 about 95% of the time."""
    rng = np.random.default_rng(0)
    covered = [lo <= 0.3 <= hi for lo, hi in
               (bootstrap_ci(rng.random(200) < 0.3, n_boot=500, seed=k) for k in range(200))]
    assert 0.88 <= np.mean(covered) <= 0.99
    assert bootstrap_ci([2.0] * 5) == (2.0, 2.0)
    values = rng.normal(size=50)
    assert bootstrap_ci(values, np.median, seed=1) == bootstrap_ci(values, np.median, seed=1)
    mean, lo, hi = mean_ci(values)
    assert lo <= mean <= hi and mean == pytest.approx(values.mean())
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci([1.0, 2.0], level=1.5)
