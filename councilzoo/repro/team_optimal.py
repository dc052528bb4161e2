"""The exact team-optimal speak/skip policy of simulated review-v0, by enumeration (Experiment A).

TRACER's controllers choose, per role and information state (``VoteTimeState``), a silent or a
speaking mode; all roles share one team reward, ``correct - lam * calls``. On a fixed set of
problems with simulated agents every draw is a pure function of (seed, problem, round, turn, ...),
so an episode's outcome is a deterministic function of the modes chosen at its decisions. With
one proposer and one reviewer every round after the first holds at most one decision, so an
episode is one path through a binary tree of depth ``rounds - 1``:

1. ``build_tree`` plays every one of the ``2^(rounds-1)`` mode sequences on every problem
   (``SequenceController``) and records, per problem and sequence, each decision's (role, state)
   and the episode's team reward;
2. a deterministic joint policy (a 0/1 table per role and state, ``TablePolicy``) picks, on each
   problem, the one sequence consistent with it (``policy_values``), so its exact value on the set
   is a gather over the tree;
3. ``team_optimum`` enumerates every table over the (role, state) pairs that occur, ``2^M``
   policies in all (M = 10-14 here), and keeps the best: the exact team-optimal policy on these
   problems. Chosen and scored on the same problems, the best of ``2^M`` is optimistic (it fits
   their noise), so Experiment A chooses it on an independent, larger problem set and scores it on
   the evaluation problems;
4. ``exploitability`` of a joint policy: the most any one role gains by changing its own table
   alone (every table of that role enumerated), a Nash gap; ``gap`` is V* - V(policy).

The learned controllers are read as their deterministic table (``learned_table``: argmax of the
average strategy, a tie or a never-trained state going to the speaking mode, as ``default_mode``).
TRACER's theory (regret matching in self-play on a common-payoff game) says the empirical play
approaches the set of coarse correlated equilibria; it does not promise the team optimum, so the
gap measures how far that falls short on this game and the exploitability whether play has
reached a (local) equilibrium.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

from councilzoo.agents.controllers import default_mode
from councilzoo.agents.controllers.regret_matching import ROLE_MODES, is_decision
from councilzoo.envs.types import Mode, TurnContext
from councilzoo.learners.tracer.controller_layer import Player, play_episodes

__all__ = [
    "ROLES", "TablePolicy", "build_tree", "problem_values", "policy_values", "team_optimum",
    "exploitability", "learned_table",
]

ROLES = ("proposer", "reviewer")


class SequenceController:
    """Plays ``bits[k]`` (0 silent, 1 speaking) at each episode's k-th decision; forced turns and
    decisions past the end of ``bits`` play their role's default."""

    def __init__(self, bits: Sequence[int]):
        self.bits, self.seen = tuple(bits), {}

    def choose(self, contexts: list[TurnContext]) -> list[Mode]:
        out = []
        for ctx in contexts:
            if not is_decision(ctx):
                out.append(default_mode(ctx))
                continue
            key = (ctx.env_index, ctx.problem.id, ctx.extras.get("episode", 0))
            k = self.seen.get(key, 0)
            self.seen[key] = k + 1
            out.append(ROLE_MODES[ctx.role][self.bits[k]] if k < len(self.bits) else default_mode(ctx))
        return out


class TablePolicy:
    """A deterministic joint policy: ``table[role][state]`` in {0 silent, 1 speaking}."""

    def __init__(self, table: Mapping[str, np.ndarray], state_fn):
        self.table, self.state_fn = table, state_fn

    def choose(self, contexts: list[TurnContext]) -> list[Mode]:
        return [ROLE_MODES[c.role][int(self.table[c.role][self.state_fn(c)])] if is_decision(c)
                else default_mode(c) for c in contexts]


@dataclass
class Tree:
    """Every mode sequence's outcome on every problem: ``role[p, s, k]`` (0 proposer, 1 reviewer,
    -1 no k-th decision) and ``state[p, s, k]`` of decision k, ``value[p, s]`` the team reward."""

    bits: np.ndarray  # (S, K) the sequences
    role: np.ndarray  # (P, S, K)
    state: np.ndarray  # (P, S, K)
    value: np.ndarray  # (P, S)
    num_states: int

    def pairs(self) -> list[tuple[int, int]]:
        """The (role, state) pairs at which some sequence decides on some problem."""
        seen = self.role >= 0
        return sorted(set(zip(self.role[seen].tolist(), self.state[seen].tolist(), strict=True)))


def build_tree(tracer, problems: Sequence) -> Tree:
    """Play every mode sequence on ``problems`` with ``tracer``'s agents and env (one batched
    play per sequence, the engine's seeds reset first, as ``Tracer.evaluate`` does)."""
    depth = tracer.cfg.env.rounds - 1
    if tracer.cfg.env.num_agents != 2:
        raise ValueError("team_optimal enumerates one proposer and one reviewer, got "
                         f"{tracer.cfg.env.num_agents} agents in review-v0")
    bits = np.array(list(product((0, 1), repeat=depth)), dtype=np.int8)
    n = len(problems)
    role = np.full((n, len(bits), depth), -1, np.int8)
    state = np.zeros((n, len(bits), depth), np.int64)
    value = np.zeros((n, len(bits)))
    for s, seq in enumerate(bits):
        tracer.engine.reset_seeds()
        records, decisions = play_episodes(Player(tracer.engine, SequenceController(seq)),
                                           tracer._reset(problems), [0] * n, tracer.state_fn)
        count = np.zeros(n, np.int64)
        for d in decisions:
            k = count[d.episode]
            role[d.episode, s, k], state[d.episode, s, k] = ROLES.index(d.role), d.state
            count[d.episode] += 1
        value[:, s] = [r.reward for r in records]
    return Tree(bits, role, state, value, tracer.state_fn.num_states)


def problem_values(tree: Tree, tables: np.ndarray) -> np.ndarray:
    """(B, P) team reward of each joint policy in ``tables`` (B, 2, num_states) of 0/1 on each of
    the tree's problems: the outcome of the first sequence whose decisions all follow the policy."""
    tables = np.asarray(tables, dtype=np.int8)
    decided = tree.role >= 0  # (P, S, K)
    wanted = tables[:, np.where(decided, tree.role, 0), tree.state]  # (B, P, S, K)
    follows = np.all((wanted == tree.bits[None, None]) | ~decided[None], axis=3)  # (B, P, S)
    chosen = follows.argmax(axis=2)  # (B, P): every problem has a consistent sequence
    return tree.value[np.arange(tree.value.shape[0])[None], chosen]


def policy_values(tree: Tree, tables: np.ndarray) -> np.ndarray:
    """(B,) mean team reward of each joint policy in ``tables`` on the tree's problems."""
    return problem_values(tree, tables).mean(axis=1)


def _tables(tree: Tree, pairs: Sequence[tuple[int, int]], base: np.ndarray | None = None) -> np.ndarray:
    """Every 0/1 assignment of ``pairs`` (2^len rows), on top of ``base`` elsewhere."""
    grid = np.array(list(product((0, 1), repeat=len(pairs))), dtype=np.int8)
    out = np.repeat((np.zeros((2, tree.num_states), np.int8) if base is None else base)[None], len(grid), 0)
    for j, (r, s) in enumerate(pairs):
        out[:, r, s] = grid[:, j]
    return out


def best_of(tree: Tree, tables: np.ndarray, chunk: int = 512) -> tuple[float, np.ndarray]:
    """The best value among ``tables`` and its table (first of the best)."""
    best, arg = -np.inf, None
    for i in range(0, len(tables), chunk):
        values = policy_values(tree, tables[i:i + chunk])
        j = int(values.argmax())
        if values[j] > best:
            best, arg = float(values[j]), tables[i + j]
    return best, arg


def team_optimum(tree: Tree) -> tuple[float, np.ndarray]:
    """V* and a team-optimal table, by enumerating every table over the pairs that occur; a state
    that never occurs on the tree's problems plays the speaking mode (as ``learned_table``), so the
    table can be scored on other problems (Experiment A chooses it on an independent set)."""
    return best_of(tree, _tables(tree, tree.pairs(), base=np.ones((len(ROLES), tree.num_states), np.int8)))


def exploitability(tree: Tree, table: np.ndarray) -> float:
    """The most one role gains by changing its own table alone (every table of it enumerated)."""
    value = float(policy_values(tree, table[None])[0])
    gains = []
    for r in range(len(ROLES)):
        best, _ = best_of(tree, _tables(tree, [p for p in tree.pairs() if p[0] == r], base=table))
        gains.append(best - value)
    return max(0.0, max(gains))


def learned_table(controller) -> np.ndarray:
    """The learned controllers' deterministic joint policy: argmax of each state's average
    strategy; a tie or a never-trained state plays the speaking mode."""
    table = np.ones((len(ROLES), controller.state_fn.num_states), np.int8)
    for r, role in enumerate(ROLES):
        matcher = controller.matchers[role]
        avg = matcher.average_strategy()
        trained = matcher.visits > 0
        table[r, trained] = (avg[trained, 1] >= avg[trained, 0]).astype(np.int8)
    return table
