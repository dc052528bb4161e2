"""Self-play in normal-form games: the zero-sum NashConv identity, the CCE gap, regret bounds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from councilzoo.testing.regret import normal_form_games
from councilzoo.theory import (
    RegretMatcher,
    biased_rps,
    cce_gap,
    coordination,
    external_regret,
    matching_pennies,
    nash_conv,
    prisoners_dilemma,
    random_game,
    regret_bound,
    rock_paper_scissors,
    self_play,
    shapley_game,
)

RTOL, ATOL = 1e-9, 1e-12  # ATOL: games with constant payoffs have a bound of 0


def _bounds(game, T):
    return np.array([regret_bound(d, a, T) for d, a in zip(game.payoff_range, game.num_actions, strict=True)])


@st.composite
def starts(draw, sizes):
    """Random initial strategies (uniform starts are fixed points of the symmetric games)."""
    out = []
    for a in sizes:
        w = np.array(draw(st.lists(st.floats(0.01, 1.0), min_size=a, max_size=a)))
        out.append(w / w.sum())
    return tuple(out)


@pytest.mark.parametrize("variant", ["rm", "rm+"])
@given(data=st.data(), game=normal_form_games(max_actions=5, zero_sum=True), T=st.integers(1, 300))
def test_zero_sum_nash_conv_equals_summed_regret(variant, data, game, T):
    """Zero-sum, simultaneous, uniform averaging: NashConv(avg) = (R_1 + R_2) / T <= bound / T."""
    result = self_play(game, T, variant=variant, initial_strategies=data.draw(starts(game.num_actions)))
    nc = nash_conv(game, result.average_strategies)
    assert abs(nc - result.regrets.sum() / T) <= 1e-9 * max(1.0, abs(nc))
    assert np.all(result.regrets <= _bounds(game, T) * (1 + RTOL) + ATOL)
    assert nc <= _bounds(game, T).sum() / T * (1 + RTOL) + ATOL


@pytest.mark.parametrize("game", [coordination(), prisoners_dilemma(), shapley_game()], ids=lambda g: g.name)
@given(data=st.data(), T=st.integers(1, 300))
def test_general_sum_cce_gap_of_joint_play(game, data, T):
    """Any game, simultaneous updates: CCE_gap(mean x^t ⊗ y^t) = max(0, max_i R_i)/T <= bound/T.

    Only the empirical joint play is guaranteed; no Nash or last-iterate claim is made."""
    result = self_play(game, T, variant=data.draw(st.sampled_from(["rm", "rm+"])),
                       initial_strategies=data.draw(starts(game.num_actions)))
    gap = cce_gap(game, result.joint)
    assert abs(gap - max(0.0, result.regrets.max()) / T) <= 1e-9
    assert np.all(result.regrets <= _bounds(game, T) * (1 + RTOL) + ATOL)
    assert gap <= _bounds(game, T).max() / T * (1 + RTOL) + ATOL


@given(game=normal_form_games(zero_sum=False), T=st.integers(1, 200))
def test_general_sum_games_cce_gap_under_bound(game, T):
    """``self_play`` itself (RegretMatcher's direct step); check_no_regret checks the same rate
    through the matchers' public API (tests/test_theory_regret_matching.py)."""
    result = self_play(game, T, variant="rm+")
    assert cce_gap(game, result.joint) <= _bounds(game, T).max() / T * (1 + RTOL) + ATOL


@pytest.mark.parametrize("averaging", ["uniform", "linear"])
@given(seed=st.integers(0, 2**16), T=st.integers(1, 200))
def test_alternating_updates_keep_regret_bound(averaging, seed, T):
    game = random_game((3, 4), seed)
    result = self_play(game, T, variant="rm+", averaging=averaging, alternating=True)
    assert result.joint is None
    assert np.all(result.regrets <= _bounds(game, T) * (1 + RTOL) + ATOL)


def test_rps_average_is_uniform_after_50k_iterations():
    """OpenSpiel's test: RPS average within 0.005 of uniform after 50k RM iterations."""
    game = rock_paper_scissors()
    result = self_play(game, 50_000, variant="rm",
                       initial_strategies=(np.array([0.1, 0.4, 0.5]), np.array([0.8, 0.1, 0.1])))
    for avg in result.average_strategies:
        np.testing.assert_allclose(avg, 1 / 3, atol=0.005)
    assert nash_conv(game, result.average_strategies) <= _bounds(game, 50_000).sum() / 50_000


def test_known_equilibria():
    start = (np.array([0.7, 0.3]), np.array([0.2, 0.8]))
    pd = self_play(prisoners_dilemma(), 200, initial_strategies=start)
    assert pd.average_strategies[0][1] > 0.99 and pd.average_strategies[1][1] > 0.99  # defect dominates
    pennies = self_play(matching_pennies(), 3000, initial_strategies=start)
    for avg in pennies.average_strategies:
        np.testing.assert_allclose(avg, 0.5, atol=0.015)
    # Zero-sum, RM+ with alternating updates and linear averaging (CFR+'s recipe): fast in practice.
    brps = self_play(biased_rps(), 1000, variant="rm+", alternating=True, averaging="linear")
    np.testing.assert_allclose(brps.average_strategies[0], [1 / 16, 10 / 16, 5 / 16], atol=1e-3)


def test_external_regret_measure_matches_matchers():
    """The measure recomputed from the logged play equals the matchers' tracked regret."""
    game = random_game((3, 2), 5)
    ms = [RegretMatcher(1, a, variant="rm+") for a in game.num_actions]
    xs, ys = [], []
    for _ in range(50):
        x, y = ms[0].strategy(), ms[1].strategy()
        ms[0].update([0], game.action_values(0, y[0])[None])
        ms[1].update([0], game.action_values(1, x[0])[None])
        xs.append(x[0])
        ys.append(y[0])
    np.testing.assert_allclose(external_regret(game, np.array(xs), np.array(ys)),
                               [ms[0].cumulative_regret()[0], ms[1].cumulative_regret()[0]], atol=1e-12)


def test_measures_reject_bad_distributions():
    game = rock_paper_scissors()
    with pytest.raises(ValueError, match="probability"):
        nash_conv(game, (np.array([0.5, 0.5, 0.5]), np.ones(3) / 3))
    with pytest.raises(ValueError, match="shape"):
        cce_gap(game, np.ones((2, 2)) / 4)
    assert nash_conv(game, (np.ones(3) / 3, np.ones(3) / 3)) == pytest.approx(0.0, abs=1e-15)
    assert cce_gap(coordination(), np.diag([0.5, 0.5])) == 0.0  # correlated coordination is a CCE
