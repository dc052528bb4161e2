"""TRACER's controller layer: play episodes in lockstep, branch at decisions, value both actions.

A *decision* is a turn where a role's silent and speaking modes are both legal. Its action values
``v = (v_silent, v_speaking)`` come from one of three rules (``_VALUE_MODES``):

- ``counterfactual`` (default): the episode is deep-copied just before the decision, the copy
  plays the other mode, then both continue to the end under the current policy. Only the
  controller choice is expanded, never token sampling: the continuation draws one utterance per
  turn as usual. Value = terminal team reward ``correct - lam * cost``. Controllers and simulated
  agents draw counter-based, so the copy replays the original's draws (common random numbers);
  the taken mode's value is therefore the real episode's reward (for LLM agents: an unbiased
  sample of it) and only the other mode is rolled out.
- ``myopic``: the released oracle scores of the turn itself, plus the cost: silent = +1/-1 for
  the pending answer's correctness; REFRESH = +1/-1 for the new answer (invalid = -1); SPEAK =
  +1/-1 for a right/wrong verdict and -1 for none (the release gave 0, so a reviewer that said
  nothing scored above one that judged wrong, while a proposer with no answer scored -1); a
  speaking mode also pays ``lam`` times its cost.
  The untaken speaking mode is valued by a one-turn branch.
- ``myopic_released``: the release's exact rule, cost-blind (a SPEAK with no verdict scores 0),
  including its flaw: when a proposer
  KEEPs, REFRESH is valued as the kept answer (never evaluated), so a state whose first update
  favoured KEEP under plain RM stays locked in KEEP.

Correctness is judged against a *label* per problem: the gold answer, or a peer-consensus label
in the label-free variant (``councilzoo.learners.tracer.learner``); the env's own gold-based rewards are
never read here. All branches of a batch are played together by the rollout engine's lockstep loop.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from councilzoo.agents.controllers import Controller, is_silent
from councilzoo.agents.controllers.regret_matching import ROLE_MODES, StateFn, is_decision
from councilzoo.envs.council_env import team_reward
from councilzoo.envs.types import EpisodeRecord, Mode, Turn, TurnContext
from councilzoo.rollout import RolloutEngine, TurnHook
from councilzoo.tasks import answers_equivalent

__all__ = ["Decision", "snapshot", "Player", "play_episodes", "branch", "action_values"]

_VALUE_MODES = ("counterfactual", "myopic", "myopic_released")


@dataclass
class Decision:
    """One controller decision of a real episode, and what is needed to value it."""

    episode: int  # index of the episode in its batch
    role: str
    state: int
    action: int  # 0 = silent mode, 1 = speaking mode
    pending: str | None  # the pending answer when the decision was taken
    turn_index: int  # position of the decision's turn in the transcript
    snapshot: object = None  # the env just before the decision (deep copy), consumed by branching
    alt_turn: Turn | None = None  # myopic: the turn the untaken speaking mode produced
    alt_record: EpisodeRecord | None = None  # counterfactual: the branch's finished episode


def snapshot(env):
    """A deep copy of a raw env sharing what never changes: problem, deck, spaces, past turns."""
    shared = (env.problem, env.deck, env._observation_space, env._action_space, *env.transcript)
    return copy.deepcopy(env, {id(x): x for x in shared})


@dataclass
class Player:
    """A controller playing raw review envs through ``engine``'s lockstep loop (``RolloutEngine.play``):
    agents are called only for speaking turns, LLM turns sharing a model in one generate call."""

    engine: RolloutEngine
    controller: Controller

    @property
    def ticks(self) -> int:
        return self.engine.stats.ticks

    def play(
        self,
        envs: Sequence,
        episodes: Sequence[int],
        first_modes: Sequence[Mode | None] | None = None,
        max_turns: int | None = None,
        on_turn: TurnHook | None = None,
    ) -> None:
        """Play ``envs`` to the end (or ``max_turns`` turns each); see ``RolloutEngine.play``."""
        self.engine.play(
            envs, episodes, controller=self.controller, first_modes=first_modes, max_turns=max_turns,
            on_turn=on_turn,
        )


def play_episodes(
    player: Player,
    envs: Sequence,
    episodes: Sequence[int],
    state_fn: StateFn,
    value_mode: str | None = None,
    on_speak: Callable[[int, TurnContext, Mode], None] | None = None,
    on_silent: Callable[[int, TurnContext, Mode], None] | None = None,
) -> tuple[list[EpisodeRecord], list[Decision]]:
    """Play fresh (reset) envs to the end; return their records and every decision taken.

    Decisions carry their information state under ``state_fn``, whatever controller plays. With
    ``value_mode`` set, each keeps a snapshot where its valuation needs a branch. ``on_speak(i,
    ctx, mode)`` sees every speaking turn (the generation layer's prompts); ``on_silent(i, ctx,
    mode)`` every decision that chose silence, with the speaking mode it passed over.
    """
    if value_mode is not None and value_mode not in _VALUE_MODES:
        raise ValueError(f"value_mode must be one of {_VALUE_MODES}, got {value_mode!r}")
    decisions: list[Decision] = []

    def record(i: int, env, ctx: TurnContext, mode: Mode) -> None:
        if on_speak is not None and not is_silent(mode):
            on_speak(i, ctx, mode)
        if not is_decision(ctx):
            return
        action = ROLE_MODES[ctx.role].index(mode)
        if on_silent is not None and action == 0:
            on_silent(i, ctx, ROLE_MODES[ctx.role][1])
        # What a valuation needs: the untaken mode's continuation, or (myopic) its one turn when it
        # speaks; the release evaluated an untaken SPEAK but never an untaken REFRESH.
        keep = value_mode == "counterfactual" or (
            action == 0
            and (value_mode == "myopic" or (value_mode == "myopic_released" and ctx.role == "reviewer"))
        )
        decisions.append(
            Decision(
                i,
                ctx.role,
                int(state_fn(ctx)),
                action,
                ctx.extras.get("pending_answer"),
                len(env.transcript),
                snapshot(env) if keep else None,
            )
        )

    player.play(envs, episodes, on_turn=record)
    return [env.episode_record() for env in envs], decisions


def branch(player: Player, decisions: Sequence[Decision], episodes: Sequence[int], value_mode: str) -> None:
    """Play every decision's untaken mode from its snapshot (to the end, or one turn if myopic).

    ``episodes`` are the real episodes' indices, as given to ``play_episodes``."""
    todo = [d for d in decisions if d.snapshot is not None]
    if not todo:
        return
    envs = [d.snapshot for d in todo]
    alt = [ROLE_MODES[d.role][1 - d.action] for d in todo]
    player.play(
        envs,
        [episodes[d.episode] for d in todo],
        first_modes=alt,
        max_turns=None if value_mode == "counterfactual" else 1,
    )
    for d, env in zip(todo, envs, strict=True):
        if value_mode == "counterfactual":
            d.alt_record = env.episode_record()
        else:
            d.alt_turn = env.transcript[d.turn_index]
        d.snapshot = None


def _signed(ok: bool) -> float:
    return 1.0 if ok else -1.0


NO_VERDICT = -1.0  # a reviewer's SPEAK without a verdict scores as a wrong one (the release: 0)


def turn_score(
    turn: Turn, pending: str | None, label: str, kind: str, no_verdict: float = NO_VERDICT
) -> float:
    """TRACER's per-turn oracle score against ``label`` (review-v0's per-role rewards); a SPEAK
    without a verdict scores ``no_verdict``."""
    pending_ok = answers_equivalent(pending, label, kind)
    if turn.mode is Mode.REFRESH:
        return _signed(answers_equivalent(turn.answer, label, kind))
    if turn.mode is Mode.SPEAK:
        return no_verdict if turn.verdict is None else _signed((turn.verdict == "RIGHT") == pending_ok)
    return _signed(pending_ok)


def _episode_value(record: EpisodeRecord, label: str | None, kind: str, lam: float, cost_unit: str) -> float:
    """Terminal team reward ``correct - lam * cost``, correctness judged against ``label``."""
    correct = label is not None and answers_equivalent(record.final_answer, label, kind)
    return team_reward(correct, record.cost, lam, cost_unit)


def action_values(
    decisions: Sequence[Decision],
    records: Sequence[EpisodeRecord],
    labels: Sequence[str | None],
    kinds: Sequence[str],
    value_mode: str,
    lam: float,
    cost_unit: str,
) -> tuple[np.ndarray, np.ndarray]:
    """``(values (n, 2), valid (n,))`` for ``decisions``; invalid rows have no label (skip them).

    ``labels[e]`` / ``kinds[e]`` belong to episode ``e``; call ``branch`` first.
    """
    values = np.zeros((len(decisions), 2))
    valid = np.ones(len(decisions), bool)
    for n, d in enumerate(decisions):
        label, kind, record = labels[d.episode], kinds[d.episode], records[d.episode]
        if label is None:
            valid[n] = False
            continue
        if value_mode == "counterfactual":
            values[n, d.action] = _episode_value(record, label, kind, lam, cost_unit)
            values[n, 1 - d.action] = _episode_value(d.alt_record, label, kind, lam, cost_unit)
            continue
        speak_turn = record.turns[d.turn_index] if d.action == 1 else d.alt_turn
        values[n, 0] = _signed(answers_equivalent(d.pending, label, kind))
        if speak_turn is None:  # myopic_released: an untaken REFRESH is valued as the kept answer
            values[n, 1] = values[n, 0]
            continue
        values[n, 1] = turn_score(speak_turn, d.pending, label, kind,
                                  NO_VERDICT if value_mode == "myopic" else 0.0)
        if value_mode == "myopic":
            spent = speak_turn.cost.calls if cost_unit == "calls" else speak_turn.cost.tokens
            values[n, 1] -= lam * spent
    return values, valid
