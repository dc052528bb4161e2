"""Two-player normal-form games: the classic test beds for regret matching.

A ``MatrixGame`` holds ``payoffs`` of shape ``(2, A1, A2)``: ``payoffs[i, a, b]`` is player
``i``'s payoff when the row player plays ``a`` and the column player plays ``b`` (the layout of
OpenSpiel's ``pyspiel.create_matrix_game(row_payoffs, col_payoffs)``).

| game                  | zero-sum | equilibrium facts used in tests                               |
|-----------------------|----------|---------------------------------------------------------------|
| rock_paper_scissors   | yes      | unique Nash: uniform, value 0                                 |
| biased_rps            | yes      | unique Nash (1/16, 10/16, 5/16) (OpenSpiel's ``matrix_brps``)  |
| matching_pennies      | yes      | unique Nash: uniform                                          |
| coordination          | no       | two pure Nash (both pick the same action) and one mixed        |
| prisoners_dilemma     | no       | defect is strictly dominant; (defect, defect) is the only CCE  |
| shapley_game          | no       | unique mixed Nash; RM's play cycles (Shapley 1964)             |
| random_game           | optional | none; used for property tests and the OpenSpiel cross-check    |
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "MatrixGame", "zero_sum", "rock_paper_scissors", "biased_rps", "matching_pennies", "coordination",
    "prisoners_dilemma", "shapley_game", "random_game",
]


@dataclass(frozen=True)
class MatrixGame:
    """A two-player normal-form game; ``payoffs[i, a, b]`` is player ``i``'s payoff."""

    payoffs: np.ndarray
    name: str = "matrix_game"

    def __post_init__(self):
        payoffs = np.array(self.payoffs, dtype=np.float64)
        if payoffs.ndim != 3 or payoffs.shape[0] != 2 or min(payoffs.shape[1:]) < 1:
            raise ValueError(f"payoffs must have shape (2, A1, A2), got {payoffs.shape}")
        if not np.all(np.isfinite(payoffs)):
            raise ValueError("payoffs must be finite")
        payoffs.setflags(write=False)
        object.__setattr__(self, "payoffs", payoffs)

    @property
    def num_actions(self) -> tuple[int, int]:
        return self.payoffs.shape[1], self.payoffs.shape[2]

    @property
    def is_zero_sum(self) -> bool:
        return bool(np.allclose(self.payoffs[0] + self.payoffs[1], 0.0, atol=1e-12))

    @property
    def payoff_range(self) -> tuple[float, float]:
        """``Delta_i = max - min`` of each player's payoffs: the width in the regret bound."""
        return tuple(float(np.ptp(p)) for p in self.payoffs)

    def action_values(self, player: int, opponent_strategy: np.ndarray) -> np.ndarray:
        """Expected payoff of each of ``player``'s actions against the opponent's mixed strategy."""
        if player == 0:
            return self.payoffs[0] @ opponent_strategy
        return opponent_strategy @ self.payoffs[1]

    def expected_payoffs(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``(u_0, u_1)`` under independent mixed strategies ``x`` (row) and ``y`` (column)."""
        return np.einsum("a,iab,b->i", x, self.payoffs, y)


def zero_sum(row_payoffs, name: str = "zero_sum") -> MatrixGame:
    """The zero-sum game in which the row player receives ``row_payoffs``."""
    row = np.asarray(row_payoffs, dtype=np.float64)
    return MatrixGame(np.stack([row, -row]), name)


def rock_paper_scissors() -> MatrixGame:
    return zero_sum([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], "rock_paper_scissors")


def biased_rps() -> MatrixGame:
    """OpenSpiel's ``matrix_brps``: Nash ``(1/16, 10/16, 5/16)`` for both players."""
    return zero_sum([[0, -25, 50], [25, 0, -5], [-50, 5, 0]], "biased_rps")


def matching_pennies() -> MatrixGame:
    return zero_sum([[1, -1], [-1, 1]], "matching_pennies")


def coordination() -> MatrixGame:
    eye = np.eye(2)
    return MatrixGame(np.stack([eye, eye]), "coordination")


def prisoners_dilemma() -> MatrixGame:
    """Actions (cooperate, defect); defect strictly dominates for both players."""
    row = np.array([[-1.0, -3.0], [0.0, -2.0]])
    return MatrixGame(np.stack([row, row.T]), "prisoners_dilemma")


def shapley_game() -> MatrixGame:
    """Shapley (1964) (OpenSpiel's ``matrix_shapleys_game``): fictitious play and RM's last
    iterate cycle; the unique Nash equilibrium is uniform."""
    row = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    col = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    return MatrixGame(np.stack([row, col]), "shapley_game")


def random_game(
    num_actions: tuple[int, int], seed: int | np.random.Generator, zero_sum_game: bool = False
) -> MatrixGame:
    """Payoffs drawn uniformly from ``[-1, 1]``; ``zero_sum_game`` makes ``u_1 = -u_0``."""
    rng = np.random.default_rng(seed)
    row = rng.uniform(-1.0, 1.0, size=num_actions)
    if zero_sum_game:
        return zero_sum(row, "random_zero_sum")
    return MatrixGame(np.stack([row, rng.uniform(-1.0, 1.0, size=num_actions)]), "random_general_sum")
