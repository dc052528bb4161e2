"""Equilibrium measures for two-player normal-form games: external regret, NashConv, CCE gap.

Definitions (Lanctot et al. 2017, arXiv:1711.00832, for NashConv; Hannan 1957 / Moulin & Vial
1978 for coarse correlated equilibria):

- external regret of player ``i`` over a play sequence:
  ``max_a sum_t [u_i(a, s_-i^t) - u_i(s^t)]``;
- ``NashConv(x, y) = sum_i max_a u_i(a, s_-i) - u_i(x, y)``: zero exactly at a Nash equilibrium;
- CCE gap of a joint distribution ``mu`` over action pairs:
  ``max_i max_a E_mu[u_i(a, b_-i) - u_i(b)]``, clipped at 0: zero exactly at a CCE.

Identities used as tests (exact, by linearity): with uniform averages of a simultaneous play
sequence of length ``T``, ``CCE_gap(mean_t x^t ⊗ y^t) = max(0, max_i R_i) / T``, and in a
zero-sum game ``NashConv(mean_t x^t, mean_t y^t) = (R_1 + R_2) / T``.
"""

from __future__ import annotations

import numpy as np

from councilzoo.theory.games import MatrixGame

__all__ = ["external_regret", "nash_conv", "cce_gap"]


def _check_strategy(strategy: np.ndarray, size: int, name: str) -> np.ndarray:
    strategy = np.asarray(strategy, dtype=np.float64)
    if strategy.shape[-1] != size:
        raise ValueError(f"{name} must have {size} actions on its last axis, got shape {strategy.shape}")
    if np.any(strategy < -1e-12) or not np.allclose(strategy.sum(axis=-1), 1.0, atol=1e-9):
        raise ValueError(f"{name} must hold probability distributions (non-negative, summing to 1)")
    return strategy


def external_regret(game: MatrixGame, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Each player's cumulative external regret over the mixed-strategy sequence ``(xs[t], ys[t])``.

    ``xs`` has shape ``(T, A1)``, ``ys`` ``(T, A2)``; returns ``[R_0, R_1]`` (not divided by T).
    """
    xs = _check_strategy(np.atleast_2d(xs), game.num_actions[0], "xs")
    ys = _check_strategy(np.atleast_2d(ys), game.num_actions[1], "ys")
    u0, u1 = game.payoffs
    values0 = ys @ u0.T  # (T, A1): u_0(a, y_t)
    values1 = xs @ u1  # (T, A2): u_1(x_t, b)
    played0 = np.einsum("ta,ta->t", xs, values0)
    played1 = np.einsum("tb,tb->t", ys, values1)
    return np.array([(values0.sum(0) - played0.sum()).max(), (values1.sum(0) - played1.sum()).max()])


def nash_conv(game: MatrixGame, strategies: tuple[np.ndarray, np.ndarray]) -> float:
    """``sum_i (best-response value_i - value_i)`` at the independent profile ``(x, y)``."""
    x = _check_strategy(strategies[0], game.num_actions[0], "strategies[0]")
    y = _check_strategy(strategies[1], game.num_actions[1], "strategies[1]")
    values = game.expected_payoffs(x, y)
    best = (game.action_values(0, y).max(), game.action_values(1, x).max())
    return float(best[0] - values[0] + best[1] - values[1])


def cce_gap(game: MatrixGame, joint: np.ndarray) -> float:
    """The largest gain any player gets by committing to one action before ``joint`` is drawn.

    ``joint`` is a distribution over action pairs, shape ``(A1, A2)``; 0 exactly at a coarse
    correlated equilibrium.
    """
    joint = np.asarray(joint, dtype=np.float64)
    if joint.shape != game.num_actions:
        raise ValueError(f"joint must have shape {game.num_actions}, got {joint.shape}")
    if np.any(joint < -1e-12) or not np.isclose(joint.sum(), 1.0, atol=1e-9):
        raise ValueError("joint must be a probability distribution over action pairs")
    u0, u1 = game.payoffs
    gain0 = (u0 @ joint.sum(axis=0)).max() - np.sum(joint * u0)
    gain1 = (joint.sum(axis=1) @ u1).max() - np.sum(joint * u1)
    return float(max(gain0, gain1, 0.0))
