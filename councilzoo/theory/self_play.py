"""Regret-matching self-play in two-player normal-form games.

Each player runs a one-state ``RegretMatcher`` and is updated with the expected value of each
of its actions against the opponent's current mixed strategy (full-information feedback).

What is guaranteed (docs/theory.md; each line has a test):

- every player's external regret stays ``<= Delta_i * sqrt(A_i * T)``, whatever the game;
- simultaneous updates, any game: the uniform average of the joint play ``x^t ⊗ y^t`` has CCE
  gap ``max(0, max_i R_i) / T``, so it approaches the coarse-correlated-equilibrium set;
- simultaneous updates, zero-sum game, uniform averaging: ``NashConv(avg) = (R_1 + R_2) / T``, so
  the average strategies approach a Nash equilibrium.

Not guaranteed: Nash convergence in general-sum games (the average reaches only the CCE set;
Shapley's game cycles) and last-iterate convergence in any game. Alternating updates (as in
CFR+) keep the per-player regret bound, but then the two players' regrets refer to different
play sequences, so the identities above do not apply and no joint distribution is returned.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from councilzoo.theory.games import MatrixGame
from councilzoo.theory.regret_matching import RegretMatcher

__all__ = ["SelfPlayResult", "self_play"]


@dataclass
class SelfPlayResult:
    """Outcome of ``self_play``.

    ``regrets[i]`` is player ``i``'s cumulative external regret over the play it faced;
    ``joint`` the uniform average of ``x^t ⊗ y^t`` (simultaneous updates only, else None).
    """

    average_strategies: tuple[np.ndarray, np.ndarray]
    last_strategies: tuple[np.ndarray, np.ndarray]
    regrets: np.ndarray
    joint: np.ndarray | None
    iterations: int
    matchers: tuple[RegretMatcher, RegretMatcher]


def self_play(
    game: MatrixGame,
    iterations: int,
    *,
    variant: str = "rm",
    averaging: str = "uniform",
    alternating: bool = False,
    exploration: float = 0.0,
    initial_strategies: tuple[np.ndarray, np.ndarray] | None = None,
) -> SelfPlayResult:
    """Run ``iterations`` rounds of regret-matching self-play on ``game``.

    ``initial_strategies`` (as in OpenSpiel's ``regret_matching``) are played in the first
    round instead of the uniform policy; regret matching decides every later round.
    """
    if int(iterations) < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    a0, a1 = game.num_actions
    m0 = RegretMatcher(1, a0, variant=variant, averaging=averaging, exploration=exploration)
    m1 = RegretMatcher(1, a1, variant=variant, averaging=averaging, exploration=exploration)
    u0, u1 = game.payoffs
    # The matchers' validated public entry points cost more than the arithmetic on 1 x A arrays;
    # self-play feeds them well-formed rows, so it calls the step directly.
    state = slice(None)
    x, y = (None, None) if initial_strategies is None else (
        np.asarray(initial_strategies[0], dtype=np.float64)[None],
        np.asarray(initial_strategies[1], dtype=np.float64)[None],
    )
    joint = None if alternating else np.zeros((a0, a1))
    for _ in range(int(iterations)):
        x = m0._policy(m0.regrets) if x is None else x
        y = m1._policy(m1.regrets) if y is None else y
        m0._update_distinct(state, y @ u0.T, x)
        if alternating:
            x = m0._policy(m0.regrets)
        else:
            joint += x[0][:, None] * y[0][None, :]
        m1._update_distinct(state, x @ u1, y)
        x, y = None, None
    return SelfPlayResult(
        average_strategies=(m0.average_strategy()[0], m1.average_strategy()[0]),
        last_strategies=(m0.strategy()[0], m1.strategy()[0]),
        regrets=np.array([m0.cumulative_regret()[0], m1.cumulative_regret()[0]]),
        joint=None if joint is None else joint / iterations,
        iterations=int(iterations),
        matchers=(m0, m1),
    )
