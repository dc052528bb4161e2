"""No-regret properties of controllers and regret matchers: strategies and ``check_no_regret``.

A *matcher* here is anything with ``strategy(states) -> (n, A)`` (the policy it plays now) and
``update(states, action_values)`` (one visit per row): ``councilzoo.theory.RegretMatcher`` as it
is, a ``RegretMatchingController`` through ``as_matcher``. The checker never trusts what the
matcher says about its own regret: it recomputes the external regret from the policies it
played and the values it was fed.

What is checked (docs/theory.md, sections 1 and 2):

- for every bounded value sequence, stationary, oblivious or adaptive (the adversary sees the
  policy), each state's cumulative external regret ``max_a sum_t [v_t(a) - sigma_t . v_t]``
  stays within ``regret_bound(Delta, A, T) = Delta sqrt(A T)``;
- two copies in simultaneous self-play on a normal-form game: the CCE gap of the empirical joint
  play ``mean_t x_t ⊗ y_t`` is at most ``max_i Delta_i sqrt(A_i / T)``, so it shrinks like
  ``1 / sqrt(T)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from councilzoo.testing.falsify import falsify
from councilzoo.theory import ControllerGame, MatrixGame, OutcomeModel, cce_gap, regret_bound

__all__ = [
    "RTOL", "as_matcher", "UtilitySequence", "utility_sequences", "normal_form_games", "controller_games",
    "played_regret", "run_sequence", "check_no_regret",
]

RTOL = 1e-9  # the bounds are exact; this only absorbs float rounding
SEQUENCE_KINDS = ("stationary", "adaptive", "oblivious", "mixed")
# Entries: a few round values (readable counterexamples) and any float in the range.
_UNIT = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0))
_PAYOFF = st.one_of(st.sampled_from([0.0, 1.0, -1.0]), st.floats(-1.0, 1.0))


class _Matcher(Protocol):
    """What ``check_no_regret`` drives: play ``strategy``, then learn from ``update``."""

    def strategy(self, states: np.ndarray) -> np.ndarray: ...

    def update(self, states: np.ndarray, action_values: np.ndarray) -> None: ...


@dataclass
class _ControllerMatcher:
    """One role of a ``RegretMatchingController`` seen as a matcher: its training policy
    (``controller.policy``, the current strategy) and ``controller.update``."""

    controller: Any
    role: str = "reviewer"

    def strategy(self, states: np.ndarray) -> np.ndarray:
        return self.controller.policy(self.role, states)

    def update(self, states: np.ndarray, action_values: np.ndarray) -> None:
        self.controller.update(self.role, states, action_values)


def as_matcher(controller: Any, role: str = "reviewer") -> _ControllerMatcher:
    """``controller``'s ``role`` as a matcher for ``check_no_regret`` (put in training mode)."""
    controller.train()
    return _ControllerMatcher(controller, role)


# ---- strategies ------------------------------------------------------------------------------
@dataclass
class UtilitySequence:
    """``T`` rounds of action values for ``S`` states in ``[low, low + delta]``.

    Round ``t`` feeds state ``s`` the value ``low + delta * unit[t, s]`` (an oblivious adversary);
    ``stationary`` states get ``unit[0, s]`` every round (a fixed best action, what a learner
    that ignores its regrets loses to); ``adaptive`` states pay ``delta`` on the actions the
    policy about to be played makes least likely and 0 elsewhere (the adversary that maximises
    regret growth).
    """

    low: float
    delta: float
    unit: np.ndarray  # (T, S, A) in [0, 1]
    stationary: np.ndarray  # (S,) bool
    adaptive: np.ndarray  # (S,) bool

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.unit.shape

    def values(self, t: int, sigma: np.ndarray) -> np.ndarray:
        """Round ``t``'s values ``(S, A)`` against the policy ``sigma`` about to be played."""
        attack = (sigma == sigma.min(axis=1, keepdims=True)).astype(np.float64)
        oblivious = np.where(self.stationary[:, None], self.unit[0], self.unit[t])
        return self.low + self.delta * np.where(self.adaptive[:, None], attack, oblivious)

    def __repr__(self) -> str:
        T, S, A = self.shape
        unit = np.array2string(self.unit, threshold=40, edgeitems=2, precision=3)
        return (f"UtilitySequence(T={T}, states={S}, actions={A}, low={self.low}, delta={self.delta}, "
                f"stationary={self.stationary.astype(int).tolist()}, "
                f"adaptive={self.adaptive.astype(int).tolist()}, unit=\n{unit})")


@st.composite
def utility_sequences(draw, num_states: int | None = None, num_actions: int | None = None,
                      max_rounds: int = 120) -> UtilitySequence:
    """Bounded value sequences: sizes drawn unless fixed, widths from 1e-3 to 37.5, any offset;
    every state stationary, adaptive or oblivious, or a mix (``SEQUENCE_KINDS``)."""
    T = draw(st.integers(1, max_rounds))
    S = num_states or draw(st.integers(1, 4))
    A = num_actions or draw(st.integers(1, 5))
    delta = draw(st.sampled_from([1.0, 2.0, 1e-3, 37.5]))
    low = draw(st.sampled_from([0.0, -1.0]) | st.floats(-100, 100))
    unit = draw(arrays(np.float64, (T, S, A), elements=_UNIT))  # mostly one fill value
    unit[0] = draw(arrays(np.float64, (S, A), elements=_UNIT, fill=st.nothing()))  # every entry drawn
    kind = draw(st.sampled_from(SEQUENCE_KINDS))
    if kind == "mixed":
        stationary, adaptive = draw(arrays(np.bool_, (S,))), draw(arrays(np.bool_, (S,)))
    else:
        stationary, adaptive = np.full(S, kind == "stationary"), np.full(S, kind == "adaptive")
    return UtilitySequence(low, delta, unit, stationary, adaptive)


@st.composite
def normal_form_games(draw, num_actions: tuple[int, int] | int | None = None, max_actions: int = 4,
                      zero_sum: bool | None = None) -> MatrixGame:
    """Two-player games with payoffs in ``[-1, 1]``: zero-sum, general-sum, or either (None)."""
    if num_actions is None:
        shape = (draw(st.integers(1, max_actions)), draw(st.integers(1, max_actions)))
    else:
        shape = (num_actions, num_actions) if isinstance(num_actions, int) else tuple(num_actions)
    row = draw(arrays(np.float64, shape, elements=_PAYOFF, fill=st.nothing()))
    zero_sum = draw(st.booleans()) if zero_sum is None else zero_sum
    col = -row if zero_sum else draw(arrays(np.float64, shape, elements=_PAYOFF, fill=st.nothing()))
    return MatrixGame(np.stack([row, col]), "zero_sum" if zero_sum else "general_sum")


@st.composite
def controller_games(draw, num_states: int | None = None, max_cost: float = 1.0) -> ControllerGame:
    """TRACER's skip/speak games: any outcome probabilities, a call cost in ``[0, max_cost]``
    (so every sampled value lies in ``[-1 - cost, 1]``)."""
    S = num_states or draw(st.integers(1, 4))
    probs = arrays(np.float64, (S,), elements=st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0.0, 1.0),
                   fill=st.nothing())
    cost = draw(st.sampled_from([0.0]) | st.floats(0.0, max_cost))
    return ControllerGame(OutcomeModel(draw(probs), draw(probs), draw(probs), cost))


# ---- the checker -----------------------------------------------------------------------------
def played_regret(policies: np.ndarray, values: np.ndarray) -> np.ndarray:
    """External regret per state of playing ``policies[t]`` against ``values[t]`` (both
    ``(T, S, A)``): ``max_a sum_t [v_t(a) - sigma_t . v_t]``."""
    played = np.einsum("tsa,tsa->ts", policies, values)
    return (values.sum(axis=0) - played.sum(axis=0)[:, None]).max(axis=1)


def run_sequence(matcher: _Matcher, sequence: UtilitySequence) -> tuple[np.ndarray, np.ndarray]:
    """Feed ``sequence`` to ``matcher``, all states each round; return the played policies and
    the values, both ``(T, S, A)``."""
    T, S, _ = sequence.shape
    states = np.arange(S)  # a policy of another shape is a contract violation, before any use
    policies, values = [], []
    for t in range(T):
        sigma = _policy(matcher.strategy(states), (S, sequence.shape[2]), f"round {t}")
        v = sequence.values(t, sigma)
        matcher.update(states, v)
        policies.append(sigma)
        values.append(v)
    return np.array(policies), np.array(values)


def _policy(returned: Any, shape: tuple[int, int], when: str) -> np.ndarray:
    """What ``strategy()`` returned as a float array, if it is ``shape[0]`` probability rows over
    ``shape[1]`` actions; else an ``AssertionError`` naming the contract (never numpy's own error)."""
    try:
        sigma = np.array(returned, dtype=np.float64)
    except (TypeError, ValueError):
        sigma = None
    if (
        sigma is None
        or sigma.shape != shape
        or np.any(sigma < -1e-12)
        or not np.allclose(sigma.sum(-1), 1.0, atol=1e-9)
    ):
        got = f"shape {sigma.shape}" if sigma is not None else type(returned).__name__
        raise AssertionError(
            f"{when}: strategy() returned {returned!r} ({got}), not {shape[0]} probability rows over "
            f"{shape[1]} actions (shape {shape})"
        )
    return sigma


def _self_play_joint(make: Callable[[int, int], _Matcher], game: MatrixGame, rounds: int) -> np.ndarray:
    """Two fresh matchers (state 0 of each) in simultaneous self-play on ``game``, each fed the
    expected value of its actions against the other's current policy; returns the empirical
    joint play ``mean_t x_t ⊗ y_t``."""
    a0, a1 = game.num_actions
    m0, m1 = make(1, a0), make(1, a1)
    u0, u1 = game.payoffs
    state = np.array([0])
    joint = np.zeros((a0, a1))
    for t in range(rounds):
        x = _policy(m0.strategy(state), (1, a0), f"self-play round {t}, row player")
        y = _policy(m1.strategy(state), (1, a1), f"self-play round {t}, column player")
        m0.update(state, y @ u0.T)
        m1.update(state, x @ u1)
        joint += x[0][:, None] * y[0][None, :]
    return joint / rounds


def check_no_regret(
    make: Callable[[int, int], _Matcher],
    *,
    num_states: int | None = None,
    num_actions: int | None = None,
    self_play: bool = True,
    max_rounds: int = 120,
    settings: Settings | None = None,
) -> None:
    """Check that matchers built by ``make(num_states, num_actions)`` are no-regret learners.

    Raises ``AssertionError`` with a shrunk counterexample when a state's external regret on some
    bounded value sequence exceeds ``Delta sqrt(A T)``, or (``self_play``) when two-player
    self-play leaves a CCE gap above ``max_i Delta_i sqrt(A_i / T)``. Give ``num_states`` /
    ``num_actions`` when ``make`` builds a fixed size (a controller: e.g. ``num_actions=2``).
    Regret is recomputed from the played policies, never read from the matcher. The bound
    assumes the matcher plays its regret-matching policy: exploration voids it.
    """

    def no_regret(sequence: UtilitySequence) -> None:
        T, S, A = sequence.shape
        policies, values = run_sequence(make(S, A), sequence)
        regret = played_regret(policies, values)
        bound = regret_bound(sequence.delta, A, T)
        worst = int(np.argmax(regret))
        if regret[worst] > bound * (1 + RTOL) + 1e-12:
            raise AssertionError(
                f"state {worst}: external regret {regret[worst]:.6g} > bound {bound:.6g} "
                f"(Delta={sequence.delta}, A={A}, T={T}); policies played:\n"
                f"{np.array2string(policies[:, worst], threshold=40, precision=3)}")

    falsify("check_no_regret", utility_sequences(num_states, num_actions, max_rounds), no_regret, settings)
    if not self_play:
        return

    def cce_rate(case: tuple[MatrixGame, int]) -> None:
        game, T = case
        gap = cce_gap(game, _self_play_joint(make, game, T))
        bounds = [regret_bound(d, a, T) / T for d, a in zip(game.payoff_range, game.num_actions, strict=True)]
        if gap > max(bounds) * (1 + RTOL) + 1e-12:
            raise AssertionError(f"self-play CCE gap {gap:.6g} after T={T} rounds > max_i Delta_i "
                                 f"sqrt(A_i / T) = {max(bounds):.6g}")

    games = normal_form_games(num_actions)
    falsify("check_no_regret (self-play)", st.tuples(games, st.integers(1, max_rounds)), cce_rate, settings)
