"""TRACER's controller layer: one regret matcher per role over information states.

A proposer chooses KEEP (no call) or REFRESH, a reviewer SKIP or SPEAK. Each role runs a tabular
regret matcher (``councilzoo.theory.RegretMatcher``, RM+ by default) whose information state is
computed from the turn's ``features`` by a pluggable ``StateFn``. The default,
:class:`VoteTimeState`, is the released state: vote bucket {none, invalid, 0, +k, -k} x time
bucket {last proposal round, not}.

Play:

- training (``train()``): sample from the *current* regret-matching strategy;
- evaluation (``eval()``): play the *average* strategy, by argmax (``eval_play="argmax"``, ties
  broken at random, never silently towards KEEP/SKIP as in the release) or by sampling it
  (``"sample"``). A state never updated has no average strategy: it is counted in
  ``untrained_hits`` and played uniformly (``untrained="uniform"``) or refused
  (``untrained="error"``), never silently defaulted.

Every draw is counter-based, a hash of (seed, epoch, problem, episode, round, turn, role)
(``episode`` = ``TurnContext.extras["episode"]``, 0 if absent),
like ``SimulatedAgent``'s: a deep copy of an episode branched at a decision replays the same
draws (common random numbers for TRACER's counterfactual values), and outcomes do not depend on
batch composition. Turns with one legal mode are not decisions: that mode is played.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from councilzoo.agents.draws import uniforms
from councilzoo.envs.types import Mode, TurnContext
from councilzoo.theory import RegretMatcher, regret_bound

__all__ = [
    "ROLE_MODES", "StateFn", "VoteTimeState", "is_decision", "UntrainedStateError",
    "RegretMatchingController",
]

# Action 0 is the silent mode (no model call), action 1 the speaking one.
ROLE_MODES: dict[str, tuple[Mode, Mode]] = {
    "proposer": (Mode.KEEP, Mode.REFRESH),
    "reviewer": (Mode.SKIP, Mode.SPEAK),
}
EVAL_PLAY = ("argmax", "sample")
UNTRAINED = ("uniform", "error")
_ROLE_KEY = {"proposer": 1, "reviewer": 2}


@runtime_checkable
class StateFn(Protocol):
    """Maps a turn context to an information-state id in ``range(num_states)``.

    ``names[s]`` is a readable label of state ``s`` (used in logs and reports).
    """

    num_states: int
    names: tuple[str, ...]

    def __call__(self, context: TurnContext) -> int: ...


class VoteTimeState:
    """The released information state: vote bucket x time bucket, from review-v0's features.

    Vote buckets: ``none`` (nothing proposed yet), ``invalid`` (the pending proposal states no
    parseable answer), ``0`` / ``+k`` / ``-k`` (sum of RIGHT=+1 / WRONG=-1 verdicts on the
    pending proposal, clipped to ``max_abs_score``). Time bucket: ``last`` when no propose round
    follows the current round (review-v0's ``is_last_proposal_round``; for a reviewer in round
    R-1 of an odd R the release said "last", here "not last" since a proposer can still act on
    the verdict). ``with_round=True`` adds the round number (1..``rounds``) as a third factor.
    """

    REQUIRED = ("round", "has_pending", "vote_score", "is_last_proposal_round")

    def __init__(
        self,
        feature_names: Sequence[str] | None = None,
        max_abs_score: int = 2,
        with_round: bool = False,
        rounds: int | None = None,
    ) -> None:
        if feature_names is None:
            from councilzoo.envs.review_v0 import FEATURE_NAMES as feature_names
        missing = [n for n in self.REQUIRED if n not in feature_names]
        if missing:
            raise ValueError(f"VoteTimeState needs features {list(self.REQUIRED)}; missing {missing} "
                             f"in {list(feature_names)}")
        if int(max_abs_score) < 1:
            raise ValueError(f"max_abs_score must be an integer >= 1, got {max_abs_score!r}")
        if with_round and (rounds is None or rounds < 1):
            raise ValueError("VoteTimeState(with_round=True) needs rounds >= 1 (the env's number of rounds)")
        self._index = {name: i for i, name in enumerate(feature_names)}
        self.max_abs_score = int(max_abs_score)
        k = self.max_abs_score
        self.vote_buckets = ("none", "invalid", "0", *(f"+{i}" for i in range(1, k + 1)),
                             *(f"-{i}" for i in range(1, k + 1)))
        self.with_round, self.rounds = with_round, (rounds or 1)
        times = ("not_last", "last")
        rounds_ = [f"r{r}" for r in range(1, self.rounds + 1)] if with_round else [""]
        self.names = tuple(
            "|".join(p for p in (v, t, r) if p) for r in rounds_ for t in times for v in self.vote_buckets
        )
        self.num_states = len(self.names)

    def vote_bucket(self, features: np.ndarray) -> int:
        f, ix = features, self._index
        if not f[ix["has_pending"]]:
            return 0 if f[ix["round"]] <= 1 else 1
        score = int(np.clip(f[ix["vote_score"]], -self.max_abs_score, self.max_abs_score))
        if score == 0:
            return 2
        return 2 + score if score > 0 else 2 + self.max_abs_score - score

    def __call__(self, context: TurnContext) -> int:
        f = np.asarray(context.features)
        last = int(bool(f[self._index["is_last_proposal_round"]]))
        state = last * len(self.vote_buckets) + self.vote_bucket(f)
        if self.with_round:
            round_ = int(np.clip(f[self._index["round"]], 1, self.rounds)) - 1
            state += round_ * 2 * len(self.vote_buckets)
        return state


def is_decision(context: TurnContext, roles: Mapping[str, tuple[Mode, Mode]] = ROLE_MODES) -> bool:
    """Whether ``context`` is a controller decision: both of its role's modes are legal."""
    modes = roles.get(context.role)
    return modes is not None and all(m in context.legal_modes for m in modes)


class UntrainedStateError(RuntimeError):
    """Evaluation reached an information state that was never updated (with ``untrained="error"``)."""


class RegretMatchingController:
    """Speak/skip and keep/refresh by regret matching, one matcher per role (see the module doc).

    Args:
        state_fn: information states (default :class:`VoteTimeState`).
        variant: ``"rm+"`` (default) or ``"rm"``; averaging, exploration: see ``RegretMatcher``.
        eval_play: ``"argmax"`` or ``"sample"`` of the average strategy in evaluation.
        untrained: what evaluation does in a never-updated state: ``"uniform"`` or ``"error"``.
        seed: seed of every draw (combined with ``epoch`` and the turn; see the module doc).
        roles: role -> (silent mode, speaking mode); default TRACER's proposer and reviewer.
    """

    def __init__(
        self,
        state_fn: StateFn | None = None,
        *,
        variant: str = "rm+",
        averaging: str = "uniform",
        exploration: float = 0.0,
        eval_play: str = "argmax",
        untrained: str = "uniform",
        seed: int = 0,
        roles: Mapping[str, tuple[Mode, Mode]] = ROLE_MODES,
    ) -> None:
        if eval_play not in EVAL_PLAY:
            raise ValueError(f"eval_play must be one of {EVAL_PLAY}, got {eval_play!r}")
        if untrained not in UNTRAINED:
            raise ValueError(f"untrained must be one of {UNTRAINED}, got {untrained!r}")
        self.state_fn = state_fn if state_fn is not None else VoteTimeState()
        self.roles = {role: (Mode(a), Mode(b)) for role, (a, b) in roles.items()}
        self.matchers = {
            role: RegretMatcher(self.state_fn.num_states, 2, variant=variant, averaging=averaging,
                                exploration=exploration, seed=seed)
            for role in self.roles
        }
        self.eval_play, self.untrained, self.seed = eval_play, untrained, int(seed)
        self.training = True
        self.epoch = 0  # advanced by the learner once per step so training draws are fresh
        self.untrained_hits = {role: np.zeros(self.state_fn.num_states, np.int64) for role in self.roles}
        # Smallest and largest action value seen per state: the bound's Delta is their gap.
        self.value_low = {role: np.full(self.state_fn.num_states, np.inf) for role in self.roles}
        self.value_high = {role: np.full(self.state_fn.num_states, -np.inf) for role in self.roles}

    # ---- modes ------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> RegretMatchingController:
        self.training = bool(mode)
        return self

    def eval(self) -> RegretMatchingController:
        return self.train(False)

    # ---- states and policies -----------------------------------------------------------------
    def is_decision(self, context: TurnContext) -> bool:
        """Whether both of the role's modes are legal (else the turn is forced)."""
        return is_decision(context, self.roles)

    def state(self, context: TurnContext) -> int:
        s = int(self.state_fn(context))
        if not 0 <= s < self.state_fn.num_states:
            raise ValueError(f"state_fn returned {s}; expected 0..{self.state_fn.num_states - 1}")
        return s

    def policy(self, role: str, states: np.ndarray) -> np.ndarray:
        """(n, 2) probabilities of (silent, speaking): current strategy in training, average in eval."""
        matcher = self.matchers[role]
        states = np.asarray(states, dtype=np.int64)
        return matcher.strategy(states) if self.training else matcher.average_strategy(states)

    def uniform_draw(self, context: TurnContext) -> float:
        """The turn's counter-based uniform draw in (0, 1), a pure function of seed, epoch and turn."""
        key = ("controller", self.seed, self.epoch, context.problem.id, context.extras.get("episode", 0),
               context.round, len(context.transcript), context.role)
        return uniforms(key, 1)[0]

    def choose(self, contexts: list[TurnContext]) -> list[Mode]:
        """One legal mode per context (the Controller protocol); one policy lookup per role."""
        out = [None if self.is_decision(ctx) else _forced(ctx, self.roles) for ctx in contexts]
        for role, modes in self.roles.items():
            rows = [i for i, ctx in enumerate(contexts) if out[i] is None and ctx.role == role]
            if not rows:
                continue
            states = np.array([self.state(contexts[i]) for i in rows], dtype=np.int64)
            probs = self.policy(role, states)
            for i, s, p in zip(rows, states, probs, strict=True):
                out[i] = modes[self._pick(contexts[i], role, int(s), p)]
        return out

    def _pick(self, context: TurnContext, role: str, state: int, probs: np.ndarray) -> int:
        u = self.uniform_draw(context)
        if not self.training:
            if self.matchers[role].visits[state] == 0:
                self.untrained_hits[role][state] += 1
                if self.untrained == "error":
                    raise UntrainedStateError(
                        f"{role} state {self.state_fn.names[state]!r} was never trained; "
                        "train longer or use untrained='uniform'"
                    )
            elif self.eval_play == "argmax":
                best = np.flatnonzero(probs == probs.max())
                return int(best[int(u * len(best))])
        return int(u >= probs[0])

    def action_index(self, role: str, mode: Mode) -> int:
        return self.roles[role].index(Mode(mode))

    # ---- learning ----------------------------------------------------------------------------
    def update(self, role: str, states: np.ndarray, action_values: np.ndarray) -> None:
        """One regret-matching visit per row, in order (see ``RegretMatcher.update``)."""
        states = np.asarray(states, dtype=np.int64)
        values = np.asarray(action_values, dtype=np.float64)
        self.matchers[role].update(states, values)
        np.minimum.at(self.value_low[role], states, values.min(axis=1))
        np.maximum.at(self.value_high[role], states, values.max(axis=1))

    def report(self) -> list[dict]:
        """Per role and trained state: visits T, external regret, its bound, speak probabilities.

        The bound is ``Delta * sqrt(2 T)`` with ``Delta`` the state's observed value range (every
        value it was updated with lies in that interval, which is all the bound needs).
        """
        rows = []
        for role, m in self.matchers.items():
            regret, avg, cur = m.cumulative_regret(), m.average_strategy(), m.strategy()
            for s in np.flatnonzero(m.visits):
                t, delta = int(m.visits[s]), float(self.value_high[role][s] - self.value_low[role][s])
                bound = float(regret_bound(delta, 2, t))
                rows.append({
                    "role": role, "state": self.state_fn.names[s], "visits": t, "delta": delta,
                    "regret": float(regret[s]), "bound": bound,
                    "avg_regret": float(regret[s]) / t, "avg_bound": bound / t,
                    "speak_avg": float(avg[s, 1]), "speak_current": float(cur[s, 1]),
                })
        return rows

    def state_dict(self) -> dict[str, np.ndarray]:
        """Every matcher's arrays (regrets, strategy sums, visits ...) keyed ``role/name``, plus epoch."""
        out = {"epoch": np.array(self.epoch)}
        for role, m in self.matchers.items():
            out.update({f"{role}/{k}": v for k, v in m.state_dict().items()})
            out[f"{role}/untrained_hits"] = self.untrained_hits[role].copy()
            out[f"{role}/value_low"] = self.value_low[role].copy()
            out[f"{role}/value_high"] = self.value_high[role].copy()
        return out

    def load_state_dict(self, d: Mapping[str, np.ndarray]) -> None:
        for role, m in self.matchers.items():
            prefix = f"{role}/"
            sub = {k[len(prefix):]: v for k, v in d.items() if k.startswith(prefix)}
            if not sub:
                raise KeyError(f"state dict has no arrays for role {role!r}")
            m.load_state_dict(sub)
            self.untrained_hits[role] = np.array(sub["untrained_hits"], dtype=np.int64)
            self.value_low[role] = np.array(sub["value_low"], dtype=np.float64)
            self.value_high[role] = np.array(sub["value_high"], dtype=np.float64)
        self.epoch = int(d["epoch"])


def _forced(ctx: TurnContext, roles: Mapping[str, tuple[Mode, Mode]]) -> Mode:
    """A turn that is not a decision: the role's legal mode, speaking preferred."""
    if not ctx.legal_modes:
        raise ValueError(f"agent {ctx.agent!r} (role {ctx.role!r}) has no legal mode")
    preferred = roles.get(ctx.role, ())[::-1]
    return next((m for m in preferred if m in ctx.legal_modes), ctx.legal_modes[0])
