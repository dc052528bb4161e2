"""Cross-check against OpenSpiel's `regret_matching` and `exploitability.nash_conv`.

Two conventions differ, and each test aligns them explicitly:
1. OpenSpiel starts every regret at 1 / INITIAL_REGRET_DENOM (1e-6); ours start at 0. The tests
   load 1e-6 into our matchers' ``regrets`` (the true external regret still starts at 0).
2. OpenSpiel's average includes the initial strategy and the strategy after the last update
   (T + 1 terms, the last never played); ours averages the T played policies. The tests compare
   OpenSpiel's average with ``(strategy_sums + strategy()) / (T + 1)`` when OpenSpiel starts
   uniform, and with that plus the initial-strategy term handled by ``update(policy=...)``.
With both aligned, and ``exploration`` = OpenSpiel's ``gamma``, the iterates are the same
arithmetic and agree to 1e-9.
"""

from __future__ import annotations

import numpy as np
import pytest

pyspiel = pytest.importorskip("pyspiel")
from open_spiel.python import policy as os_policy  # noqa: E402
from open_spiel.python.algorithms import exploitability  # noqa: E402
from open_spiel.python.algorithms import regret_matching as os_rm  # noqa: E402

from councilzoo.theory import RegretMatcher, nash_conv, random_game  # noqa: E402


def _our_rm(game, T, gamma, initial=None):
    """Simultaneous RM self-play through the public RegretMatcher API, OpenSpiel's conventions."""
    ms = [RegretMatcher(1, a, variant="rm", exploration=gamma) for a in game.num_actions]
    for m in ms:
        m.regrets[:] = 1.0 / os_rm.INITIAL_REGRET_DENOM
    x, y = (None, None) if initial is None else (initial[0][None], initial[1][None])
    for _ in range(T):
        x = ms[0].strategy([0]) if x is None else x
        y = ms[1].strategy([0]) if y is None else y
        ms[0].update([0], game.action_values(0, y[0])[None], policy=x)
        ms[1].update([0], game.action_values(1, x[0])[None], policy=y)
        x = y = None
    return [(m.strategy_sums[0] + m.strategy()[0]) / (T + 1) for m in ms]


@pytest.mark.parametrize("seed,sizes,gamma", [(0, (3, 3), 1e-6), (1, (2, 5), 0.0), (2, (4, 3), 1e-3),
                                              (3, (5, 5), 1e-8), (4, (1, 3), 1e-6)])
def test_average_strategies_equal_openspiel(seed, sizes, gamma):
    game = random_game(sizes, seed, zero_sum_game=True)
    T = 1000
    ref = os_rm.regret_matching([game.payoffs[0], game.payoffs[1]], iterations=T, gamma=gamma)
    for ours, theirs in zip(_our_rm(game, T, gamma), ref, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)


def test_initial_strategies_equal_openspiel():
    """OpenSpiel's RPS test setup: the initial strategies are played first, then counted once in
    the average (our ``strategy_sums`` already hold them, via ``update(policy=...)``)."""
    game = random_game((3, 3), 11, zero_sum_game=True)
    initial = (np.array([0.1, 0.4, 0.5]), np.array([0.8, 0.1, 0.1]))
    T = 500
    ref = os_rm.regret_matching([game.payoffs[0], game.payoffs[1]], iterations=T, gamma=1e-6,
                                initial_strategies=list(initial))
    for ours, theirs in zip(_our_rm(game, T, 1e-6, initial), ref, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_nash_conv_equals_openspiel(seed):
    rng = np.random.default_rng(seed)
    game = random_game((3, 4), seed, zero_sum_game=bool(seed % 2))
    x, y = rng.dirichlet(np.ones(3)), rng.dirichlet(np.ones(4))
    os_game = pyspiel.convert_to_turn_based(
        pyspiel.create_matrix_game(game.payoffs[0].tolist(), game.payoffs[1].tolist()))
    tabular = os_policy.TabularPolicy(os_game)
    for player, strategy in ((0, x), (1, y)):
        state = next(key for key in tabular.state_lookup if key.startswith(f"Current player: {player}"))
        row = np.zeros(tabular.action_probability_array.shape[1])  # padded to the widest player
        row[: len(strategy)] = strategy
        tabular.action_probability_array[tabular.state_lookup[state]] = row
    assert nash_conv(game, (x, y)) == pytest.approx(exploitability.nash_conv(os_game, tabular), abs=1e-9)
