"""TRACER's controller game: a binary skip/speak choice per information state, solved by RM.

TRACER (docs/tracer.md) gives each role a controller: the reviewer chooses SKIP or SPEAK,
the proposer KEEP or REFRESH; action index 0 is the free action (skip / keep) and 1 the call
(speak / refresh). The controller is tabular regret matching per information state, fed with
myopic oracle scores. Here the scores come from an ``OutcomeModel``: at state ``s`` the pending
answer is correct with probability ``p_correct``; a call turns a wrong answer right with
probability ``p_rescue``, a right answer wrong with ``p_harm``, and costs ``call_cost``. Payoffs
are in TRACER's units, +1 for a correct final answer and -1 for a wrong one, so

    v(skip)  = 2 p - 1
    v(speak) = 2 [p (1 - p_harm) + (1 - p) p_rescue] - 1 - call_cost.

Each information state is a game against nature. Its equilibria are exactly the policies that
put all mass on ``argmax_a v(a)``; regret matching reaches them in average: with exact values
and uniform averaging, ``max_a v(a) - avg . v = max_a R_T(a) / T <= Delta sqrt(2 / T)``, where
``Delta = 2 + call_cost`` is the width of the sampled payoffs (``[-1 - cost, 1]``). With sampled
outcomes the regret bound still holds per sample path; the average policy then approaches the
argmax up to sampling noise. This per-state bound is what TRACER's convergence claim rests on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from councilzoo.theory.regret_matching import RegretMatcher, regret_bound

__all__ = ["ACTIONS", "OutcomeModel", "ControllerGame", "ControllerSolution", "solve_controller_game"]

ACTIONS = ("skip", "speak")


def _probabilities(name: str, values, size: int) -> np.ndarray:
    array = np.broadcast_to(np.asarray(values, dtype=np.float64), (size,)).copy()
    if np.any((array < 0) | (array > 1)) or not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must hold probabilities in [0, 1], got {array}")
    return array


@dataclass(frozen=True)
class OutcomeModel:
    """Per-state outcome probabilities of a call (e.g. measured on simulated agents).

    Arrays have one entry per information state (scalars broadcast); ``call_cost >= 0`` is in
    the same units as the +/-1 correctness payoff.
    """

    p_correct: np.ndarray
    p_rescue: np.ndarray
    p_harm: np.ndarray
    call_cost: np.ndarray | float = 0.0
    state_names: tuple[str, ...] = field(default=())

    def __post_init__(self):
        size = np.size(self.p_correct)
        for name in ("p_correct", "p_rescue", "p_harm"):
            object.__setattr__(self, name, _probabilities(name, getattr(self, name), size))
        cost = np.broadcast_to(np.asarray(self.call_cost, dtype=np.float64), (size,)).copy()
        if np.any(cost < 0) or not np.all(np.isfinite(cost)):
            raise ValueError(f"call_cost must be finite and >= 0, got {cost}")
        object.__setattr__(self, "call_cost", cost)
        names = tuple(self.state_names) or tuple(f"state_{s}" for s in range(size))
        if len(names) != size:
            raise ValueError(f"state_names has {len(names)} names for {size} states")
        object.__setattr__(self, "state_names", names)

    @property
    def num_states(self) -> int:
        return len(self.p_correct)


class ControllerGame:
    """The per-state skip/speak games of one controller, built from an ``OutcomeModel``."""

    def __init__(self, outcome_model: OutcomeModel):
        self.outcome_model = outcome_model
        self.num_states = outcome_model.num_states
        self.payoff_width = 2.0 + outcome_model.call_cost

    def action_values(self) -> np.ndarray:
        """Expected payoff of (skip, speak) per state, shape ``(S, 2)``."""
        m = self.outcome_model
        p_after_call = m.p_correct * (1 - m.p_harm) + (1 - m.p_correct) * m.p_rescue
        return np.stack([2 * m.p_correct - 1, 2 * p_after_call - 1 - m.call_cost], axis=1)

    def sample_action_values(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One simulated episode per entry of ``states``: both actions scored on the same draw.

        The pending answer's correctness ``Y`` is drawn once; skip scores ``2Y - 1`` and speak
        scores the correctness after the call, so the two values are a counterfactual pair (the
        full-information feedback TRACER's oracle scores give).
        """
        m = self.outcome_model
        correct = rng.random(len(states)) < m.p_correct[states]
        flip = rng.random(len(states)) < np.where(correct, m.p_harm[states], m.p_rescue[states])
        after_call = correct ^ flip
        return np.stack([2.0 * correct - 1, 2.0 * after_call - 1 - m.call_cost[states]], axis=1)


@dataclass
class ControllerSolution:
    """Regret-matching solution of a ``ControllerGame``.

    ``policy`` is the average strategy (the equilibrium approximation); ``best_action`` the
    argmax of the exact ``action_values`` (ties -> skip); ``regrets`` and ``bounds`` the per-state
    external regret and its ``Delta sqrt(2 T)`` bound.
    """

    action_values: np.ndarray
    policy: np.ndarray
    best_action: np.ndarray
    regrets: np.ndarray
    bounds: np.ndarray
    matcher: RegretMatcher


def solve_controller_game(
    game: ControllerGame,
    iterations: int,
    variant: str = "rm+",
    *,
    sampled: bool = True,
    states_per_iteration: int | None = None,
    seed: int = 0,
) -> ControllerSolution:
    """Run regret matching on every information state of ``game`` for ``iterations`` rounds.

    ``sampled=True`` feeds simulated outcomes (``sample_action_values``), ``False`` the exact
    expected values. ``states_per_iteration`` visits that many states drawn uniformly with
    replacement per round, as episodes do (default: every state every round).
    """
    if int(iterations) < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    rng = np.random.default_rng(seed)
    matcher = RegretMatcher(game.num_states, len(ACTIONS), variant=variant, seed=seed)
    exact = game.action_values()
    all_states = np.arange(game.num_states)
    for _ in range(int(iterations)):
        states = all_states if states_per_iteration is None else rng.integers(
            game.num_states, size=states_per_iteration)
        values = game.sample_action_values(states, rng) if sampled else exact[states]
        matcher.update(states, values)
    return ControllerSolution(
        action_values=exact,
        policy=matcher.average_strategy(),
        best_action=exact.argmax(axis=1),
        regrets=matcher.cumulative_regret(),
        bounds=regret_bound(1.0, len(ACTIONS), matcher.visits) * game.payoff_width,
        matcher=matcher,
    )
