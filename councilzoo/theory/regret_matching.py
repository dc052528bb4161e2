"""Regret matching (RM) and regret matching+ (RM+), vectorised over many information states.

Regret matching is due to Hart & Mas-Colell (2000), "A simple adaptive procedure leading to
correlated equilibrium", Econometrica 68(5); RM+ to Tammelin (2014), "Solving large imperfect
information games using CFR+", arXiv:1407.5042.

Each information state ``s`` runs its own regret matcher over ``A`` actions. At a visit with
action values ``v`` (one per action) the matcher plays ``sigma`` and accumulates the
instantaneous regrets ``r(a) = v(a) - sigma . v``:

- RM:  ``R_t = R_{t-1} + r_t``, ``sigma_{t+1} ∝ [R_t]+`` (uniform when all are <= 0);
- RM+: ``Q_t = max(Q_{t-1} + r_t, 0)``, ``sigma_{t+1} ∝ Q_t``.

Guarantee (Blackwell's potential argument; see docs/theory.md). If every action value of a
state lies in an interval of width ``Delta``, then after ``T`` visits with ``exploration=0``
the true external regret of that state obeys, for ANY (even adversarial) value sequence,

    max_a R_T(a) <= ||[R_T]+||_2 <= Delta * sqrt(A * T)    (= ``regret_bound(Delta, A, T)``)

for RM and for RM+ (for RM+ because ``R_T <= Q_T`` componentwise and ``||Q_T||^2`` grows by at
most ``||r_t||^2`` per visit). The matcher tracks the true external regret ``R`` separately
from RM+'s clipped ``Q`` so the bound can be checked (``cumulative_regret``). With
``exploration=gamma > 0`` the played policy is ``(1 - gamma) sigma + gamma / A`` (as in
OpenSpiel's ``regret_matching``) and the bound above is no longer guaranteed.
"""

from __future__ import annotations

import json
from os import PathLike

import numpy as np

__all__ = ["regret_bound", "RegretMatcher"]

VARIANTS = ("rm", "rm+")
AVERAGING = ("uniform", "linear")
_FORMAT_VERSION = 1


def regret_bound(delta: float, num_actions: int, T: int | np.ndarray) -> float | np.ndarray:
    """Return ``delta * sqrt(num_actions * T)``: the RM / RM+ bound on cumulative external regret.

    ``delta`` is the width of the interval that holds every action value; ``T`` the number of
    updates (an array of visit counts gives one bound per state).
    """
    if delta < 0:
        raise ValueError(f"delta must be >= 0 (the width of the payoff interval), got {delta}")
    if num_actions < 1:
        raise ValueError(f"num_actions must be >= 1, got {num_actions}")
    return delta * np.sqrt(num_actions * np.asarray(T, dtype=np.float64))


def _occurrence_rank(states: np.ndarray) -> np.ndarray:
    """For each entry, how many earlier entries hold the same state (0 for the first visit)."""
    order = np.argsort(states, kind="stable")
    sorted_states = states[order]
    group_start = np.r_[0, np.flatnonzero(sorted_states[1:] != sorted_states[:-1]) + 1]
    group_sizes = np.diff(np.r_[group_start, len(states)])
    rank_sorted = np.arange(len(states)) - np.repeat(group_start, group_sizes)
    rank = np.empty_like(rank_sorted)
    rank[order] = rank_sorted
    return rank


class RegretMatcher:
    """Tabular RM / RM+ for ``num_states`` information states with ``num_actions`` actions each.

    Args:
        num_states: number of information states ``S``.
        num_actions: number of actions ``A`` in every state.
        variant: ``"rm+"`` (default; cannot lock a state into one action after one bad update,
            the failure seen in TRACER's release) or ``"rm"``.
        averaging: weight of the visit-``t`` policy in the average strategy: ``"uniform"`` (1)
            or ``"linear"`` (``t``, the state's own visit count; the CFR+ choice).
        exploration: ``gamma`` in ``[0, 1]``; the played policy mixes in ``gamma`` of uniform.
        seed: seed of the generator used by ``sample_actions``.

    Arrays (one row per state): ``regrets`` (``R`` for RM, ``Q`` for RM+: what drives the
    policy), ``external_regrets`` (the true cumulative regret ``R`` for both variants),
    ``strategy_sums`` (weighted sum of played policies) and ``visits`` (updates per state; 0
    means untrained).
    """

    def __init__(
        self,
        num_states: int,
        num_actions: int,
        variant: str = "rm+",
        averaging: str = "uniform",
        exploration: float = 0.0,
        seed: int | None = None,
    ):
        if int(num_states) < 1:
            raise ValueError(f"num_states must be >= 1, got {num_states}")
        if int(num_actions) < 1:
            raise ValueError(f"num_actions must be >= 1, got {num_actions}")
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if averaging not in AVERAGING:
            raise ValueError(f"averaging must be one of {AVERAGING}, got {averaging!r}")
        if not 0.0 <= float(exploration) <= 1.0:
            raise ValueError(f"exploration must be in [0, 1], got {exploration}")
        self.num_states = int(num_states)
        self.num_actions = int(num_actions)
        self.variant = variant
        self.averaging = averaging
        self.exploration = float(exploration)
        self.rng = np.random.default_rng(seed)
        shape = (self.num_states, self.num_actions)
        self.regrets = np.zeros(shape)
        self.external_regrets = np.zeros(shape)
        self.strategy_sums = np.zeros(shape)
        self.visits = np.zeros(self.num_states, dtype=np.int64)

    # ----------------------------------------------------------------------------- queries
    def _states(self, states) -> np.ndarray | slice:
        if states is None:
            return slice(None)
        states = np.asarray(states)
        if states.size == 0:
            return states.astype(np.int64).reshape(0)
        if states.ndim != 1 or not np.issubdtype(states.dtype, np.integer):
            raise ValueError(f"states must be a 1-D integer array, got shape {states.shape} {states.dtype}")
        if (states.min() < 0 or states.max() >= self.num_states):
            raise ValueError(f"states must lie in [0, {self.num_states}), got min {states.min()} "
                             f"max {states.max()}")
        return states

    def _policy(self, regrets: np.ndarray) -> np.ndarray:
        positive = np.maximum(regrets, 0.0)
        total = positive.sum(axis=1, keepdims=True)
        uniform = 1.0 / self.num_actions
        sigma = np.divide(positive, total, out=np.full_like(positive, uniform), where=total > 0)
        if self.exploration > 0:
            # Uniform rows stay exactly uniform, as in OpenSpiel's regret_matching.
            sigma = np.where(total > 0, self.exploration * uniform + (1 - self.exploration) * sigma, sigma)
        return sigma

    def strategy(self, states=None) -> np.ndarray:
        """The current (played) policy of ``states`` (all states if None), shape ``(n, A)``."""
        return self._policy(self.regrets[self._states(states)])

    def average_strategy(self, states=None) -> np.ndarray:
        """The average policy ``strategy_sums / sum``; uniform for a never-updated state."""
        sums = self.strategy_sums[self._states(states)]
        total = sums.sum(axis=1, keepdims=True)
        return np.divide(sums, total, out=np.full_like(sums, 1.0 / self.num_actions), where=total > 0)

    def cumulative_regret(self, states=None) -> np.ndarray:
        """``max_a R(a)`` per state: the true external regret (not RM+'s clipped ``Q``)."""
        return self.external_regrets[self._states(states)].max(axis=1)

    def sample_actions(self, states=None) -> np.ndarray:
        """Sample one action per state from the current policy with the matcher's generator."""
        sigma = self.strategy(states)
        u = self.rng.random((len(sigma), 1))
        return np.minimum((np.cumsum(sigma, axis=1) < u).sum(axis=1), self.num_actions - 1)

    # ----------------------------------------------------------------------------- update
    def update(self, states, action_values, policy: np.ndarray | None = None) -> None:
        """Apply one visit per row: ``states[i]`` observed ``action_values[i]`` (shape ``(n, A)``).

        ``states=None`` updates every state. A state may repeat; repeats are applied in order,
        exactly as separate calls would be. ``policy`` (shape ``(n, A)``) overrides the played
        policy, e.g. the initial strategies of a self-play run; by default each row plays the
        matcher's current policy. The regret bound assumes the default.
        """
        idx = self._states(states)
        values = np.asarray(action_values, dtype=np.float64)
        n = self.num_states if isinstance(idx, slice) else len(idx)
        if values.shape != (n, self.num_actions):
            raise ValueError(f"action_values must have shape ({n}, {self.num_actions}), got {values.shape}")
        if not np.all(np.isfinite(values)):
            raise ValueError("action_values must be finite")
        if policy is not None:
            policy = np.asarray(policy, dtype=np.float64)
            if policy.shape != values.shape:
                raise ValueError(f"policy must have shape {values.shape}, got {policy.shape}")
        if isinstance(idx, slice):
            self._update_distinct(idx, values, policy)
            return
        if len(idx) == 0:
            return
        if np.bincount(idx, minlength=self.num_states).max() == 1:
            self._update_distinct(idx, values, policy)
            return
        rank = _occurrence_rank(idx)
        for k in range(int(rank.max()) + 1):
            rows = np.flatnonzero(rank == k)
            self._update_distinct(idx[rows], values[rows], None if policy is None else policy[rows])

    def _update_distinct(
        self, states: np.ndarray | slice, values: np.ndarray, policy: np.ndarray | None
    ) -> None:
        """One visit to each of ``states`` (distinct, already validated): the RM / RM+ step."""
        sigma = self._policy(self.regrets[states]) if policy is None else policy
        r = values - np.einsum("na,na->n", sigma, values)[:, None]
        self.external_regrets[states] += r
        if self.variant == "rm+":
            self.regrets[states] = np.maximum(self.regrets[states] + r, 0.0)
        else:
            self.regrets[states] += r
        self.visits[states] += 1
        weight = 1.0 if self.averaging == "uniform" else self.visits[states][:, None].astype(np.float64)
        self.strategy_sums[states] += weight * sigma

    # ----------------------------------------------------------------------------- persistence
    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything needed to resume bit-exactly, as numpy arrays (no pickled objects)."""
        return {
            "format_version": np.array(_FORMAT_VERSION),
            "variant": np.array(self.variant),
            "averaging": np.array(self.averaging),
            "exploration": np.array(self.exploration),
            "regrets": self.regrets.copy(),
            "external_regrets": self.external_regrets.copy(),
            "strategy_sums": self.strategy_sums.copy(),
            "visits": self.visits.copy(),
            "rng_state": np.array(json.dumps(self.rng.bit_generator.state)),
        }

    def load_state_dict(self, d: dict[str, np.ndarray]) -> None:
        """Restore from ``state_dict()``; shapes must match this matcher's ``(S, A)``."""
        missing = {"variant", "averaging", "exploration", "regrets", "external_regrets",
                   "strategy_sums", "visits"} - set(d)
        if missing:
            raise KeyError(f"state dict lacks {sorted(missing)}")
        shape = (self.num_states, self.num_actions)
        for key in ("regrets", "external_regrets", "strategy_sums"):
            if np.shape(d[key]) != shape:
                raise ValueError(f"{key} has shape {np.shape(d[key])}, this matcher expects {shape}")
        if np.shape(d["visits"]) != (self.num_states,):
            raise ValueError(f"visits has shape {np.shape(d['visits'])}, expected ({self.num_states},)")
        variant, averaging = str(d["variant"]), str(d["averaging"])
        if variant not in VARIANTS or averaging not in AVERAGING:
            raise ValueError(f"unknown variant {variant!r} or averaging {averaging!r} in state dict")
        self.variant, self.averaging = variant, averaging
        self.exploration = float(d["exploration"])
        self.regrets = np.array(d["regrets"], dtype=np.float64)
        self.external_regrets = np.array(d["external_regrets"], dtype=np.float64)
        self.strategy_sums = np.array(d["strategy_sums"], dtype=np.float64)
        self.visits = np.array(d["visits"], dtype=np.int64)
        if "rng_state" in d:
            self.rng.bit_generator.state = json.loads(str(d["rng_state"]))

    def save(self, path: str | PathLike) -> None:
        """Write ``state_dict()`` with ``np.savez`` (readable with ``allow_pickle=False``)."""
        np.savez(path, **self.state_dict())

    @classmethod
    def load(cls, path: str | PathLike) -> RegretMatcher:
        """Build a matcher from a file written by ``save``."""
        with np.load(path, allow_pickle=False) as f:
            d = {k: f[k] for k in f.files}
        num_states, num_actions = d["regrets"].shape
        matcher = cls(num_states, num_actions)
        matcher.load_state_dict(d)
        return matcher
