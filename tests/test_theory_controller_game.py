"""TRACER's controller game: exact values, the per-state regret bound, and the equilibrium policy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from councilzoo.testing.regret import controller_games
from councilzoo.theory import ControllerGame, OutcomeModel, solve_controller_game


@given(game=controller_games(max_cost=0.5))
def test_exact_values_bound_and_equilibrium(game):
    """Exact values, uniform averaging: max_a v(a) - avg.v = max_a R_T(a)/T <= Delta sqrt(2/T)."""
    T, cost = 100, game.outcome_model.call_cost
    sol = solve_controller_game(game, T, variant="rm+", sampled=False)
    v = sol.action_values
    suboptimality = v.max(axis=1) - (sol.policy * v).sum(axis=1)
    np.testing.assert_allclose(suboptimality, sol.regrets / T, atol=1e-12)
    assert np.all(sol.regrets <= sol.bounds * (1 + 1e-9))
    np.testing.assert_allclose(sol.bounds, (2 + cost) * np.sqrt(2 * T))


@pytest.mark.parametrize("variant", ["rm", "rm+"])
def test_sampled_outcomes_recover_the_equilibrium(variant):
    model = OutcomeModel(p_correct=[0.9, 0.3, 0.5, 0.6], p_rescue=[0.5, 0.6, 0.1, 0.6],
                         p_harm=[0.2, 0.05, 0.3, 0.0], call_cost=0.05,
                         state_names=("agree_late", "disagree", "invalid", "none"))
    game = ControllerGame(model)
    sol = solve_controller_game(game, 3000, variant=variant, states_per_iteration=2, seed=1)
    assert np.all(sol.regrets <= sol.bounds * (1 + 1e-9))  # holds per sample path
    np.testing.assert_array_equal(sol.best_action, [0, 1, 0, 1])
    best_mass = sol.policy[np.arange(4), sol.best_action]
    assert np.all(best_mass > 0.9), best_mass


@given(game=controller_games(max_cost=1.0))
def test_sampled_values_average_to_exact_values(game):
    n, S, cost = 4000, game.num_states, game.outcome_model.call_cost
    samples = game.sample_action_values(np.repeat(np.arange(S), n), np.random.default_rng(0))
    means = samples.reshape(S, n, 2).mean(axis=1)
    np.testing.assert_allclose(means, game.action_values(), atol=5 * 2 / np.sqrt(n))
    assert samples.min() >= -1 - cost.max() and samples.max() <= 1.0  # width Delta = 2 + cost


def test_outcome_model_validation():
    with pytest.raises(ValueError, match="p_harm"):
        OutcomeModel([0.5], [0.5], [1.5])
    with pytest.raises(ValueError, match="call_cost"):
        OutcomeModel([0.5], [0.5], [0.5], call_cost=-1)
    with pytest.raises(ValueError, match="state_names"):
        OutcomeModel([0.5, 0.5], 0.5, 0.5, state_names=("a",))
