"""
# Cohort (Co-RL)

Co-RL's cooperative label-free step as a parallel PettingZoo game: N members answer the same
item (each possibly its own paraphrase) with G samples, and each sample is rewarded by a named
rule, typically against a *peer's* label. One step per item; an episode is `max_cycles` items
(default 1: one-shot).

| Creation           | `make("councilzoo/cohort-v0", num_agents=2, reward_rule="ring")` (AEC)  |
|--------------------|--------------------------------------------------------------------------|
| Actions            | Discrete(8) mode; ANSWER with `Action.samples` = the member's G texts    |
| Parallel API       | Yes (native): `parallel_env()`, `make_parallel("councilzoo/cohort-v0")`  |
| AEC API            | `env()`, `make("councilzoo/cohort-v0")`: its AEC conversion              |
| Agents             | `['member_0', ..., 'member_{N-1}']`                                      |
| Roles              | `member`                                                                 |
| Legal modes        | ANSWER (any other mode abstains)                                         |
| Observation        | Dict(transcript=Text, action_mask=Box(int8, 8), features=Box(f32, 3))    |
| Reward             | mean of the member's per-sample rewards under `reward_rule`              |

### Rules

`reset` deals one problem. Member n sees the question `paraphrase(problem, views[n])` (`views`
defaults to all 0, the original text; labels are paired by problem id, never by surface form).
One `step` takes every member's action. An ANSWER's `Action.samples` holds its G sampled texts
(no samples: `text` alone; with `Action.answer` and no samples, that answer: for code problems an
output signature). Each sample's answer is `answers_for(problem, samples)`: `extract_answer(sample,
kind)`, and for code problems the output signature of the sample's program on the test inputs.
Any other mode (say, a mode sampled without the mask) abstains: the member gives no answer on
this item and scores 0, and what it wrote is ignored. The rewards then come from
`councilzoo.envs.rewards.compute_rewards(reward_rule, answers, kind, gold, tau)`. The episode
ends after `max_cycles` such steps; before that, each step deals the next problem of the deck
(as a `reset()` without seed would) and the members observe it.

### Reward rules

`ground_truth` (gold answer), `ring` (member n is taught by member n+1 mod N, the Co-RL
release), `peer_majority` (plurality of the other members' labels, ties -> unlabeled),
`peer_share` (the share of the labeled peers whose label the sample matches: no unanimity among
peers needed when N > 2; equals `ring` for N = 2), `self_majority` (TTRL). A sample scores 1 when
its answer is equivalent to the member's label, else 0 (`peer_share`: its share); an unlabeled
member scores 0 on every sample. Under the peer rules the gold answer never
enters a reward and a member's reward never depends on its own label.

### Observation space

`transcript`: the member's own question (after the last step, also its sampled answers).
`features` (`FEATURE_NAMES`): member_index, view (paraphrase index), num_members.

### Infos

Per member after each step: `sample_answers`, `sample_rewards`, `label`, `unlabeled`, and the
diagnostic `label_correct` (label vs gold; None without gold; never used by peer rules).
`episode_record()` is the record of the latest answered item (turns of round c are the c-th
item's); its final answer is the plurality of all members' sample answers (member order).

### Arguments

`num_agents` (2), `reward_rule` ("ring"), `views` (None = all 0), `num_samples` (8, the G
agents are asked for, in `TurnContext.extras`), `tau` (0.0, label share threshold in [0, 1]),
`max_cycles` (1, items per episode), `problems`, `max_utterance_chars` (8000), `render_mode`
(None | "ansi" | "human").

### Version history

* v0: initial release.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from pettingzoo import ParallelEnv

from councilzoo.envs.council_env import (
    MAX_TRANSCRIPT_CHARS,
    MAX_UTTERANCE_CHARS,
    RENDER_MODES,
    ProblemDeck,
    as_action,
    build_spaces,
    check_count,
    check_render_mode,
    grade,
    make_turn,
    render_problem,
    show,
    to_printable,
)
from councilzoo.envs.rewards import PEER_RULES, RULES, compute_rewards
from councilzoo.envs.types import NUM_MODES, Cost, EpisodeRecord, Mode, Turn, TurnContext
from councilzoo.envs.wrappers import OrderEnforcing, ParallelToAEC
from councilzoo.tasks import Problem, answers_for, paraphrase, plurality

__all__ = ["FEATURE_NAMES", "parallel_env", "raw_env", "env"]

FEATURE_NAMES = ("member_index", "view", "num_members")
MEMBER_INDEX, VIEW, NUM_MEMBERS = range(len(FEATURE_NAMES))
LEGAL_MODES = (Mode.ANSWER,)


class parallel_env(ParallelEnv):
    """Co-RL's cohort step (see the module docstring)."""

    metadata = {"name": "cohort_v0", "render_modes": list(RENDER_MODES), "is_parallelizable": True}
    env_id = "councilzoo/cohort-v0"
    FEATURE_NAMES = FEATURE_NAMES

    def __init__(
        self,
        num_agents: int = 2,
        reward_rule: str = "ring",
        views: Sequence[int] | None = None,
        *,
        num_samples: int = 8,
        tau: float = 0.0,
        max_cycles: int = 1,
        problems: Iterable[Problem] | None = None,
        max_utterance_chars: int = MAX_UTTERANCE_CHARS,
        render_mode: str | None = None,
    ) -> None:
        check_count("cohort-v0", "num_agents", num_agents, 1)
        if reward_rule not in RULES:
            raise ValueError(f"cohort-v0: reward_rule must be one of {RULES}, got {reward_rule!r}")
        if reward_rule in PEER_RULES and num_agents < 2:
            raise ValueError(f"cohort-v0: reward_rule {reward_rule!r} needs num_agents >= 2")
        views = [0] * num_agents if views is None else [int(v) for v in views]
        if len(views) != num_agents or min(views) < 0:
            raise ValueError(f"cohort-v0: views must hold {num_agents} indices >= 0, got {views!r}")
        if not 0.0 <= tau <= 1.0:
            raise ValueError(f"cohort-v0: tau (a label share threshold) must be in [0, 1], got {tau!r}")
        if isinstance(max_cycles, bool) or int(max_cycles) != max_cycles or max_cycles < 1:
            raise ValueError(f"cohort-v0: max_cycles must be an integer >= 1, got {max_cycles!r}")
        check_render_mode(render_mode)
        self.possible_agents = [f"member_{i}" for i in range(num_agents)]
        self.roles = dict.fromkeys(self.possible_agents, "member")
        self.reward_rule, self.views, self.tau = reward_rule, views, float(tau)
        self.num_samples, self.max_utterance_chars = int(num_samples), max_utterance_chars
        self.max_cycles = int(max_cycles)
        self.deck = ProblemDeck(problems)
        self.render_mode = render_mode
        self.env_index = 0
        self._observation_space, self._action_space = build_spaces(len(FEATURE_NAMES), MAX_TRANSCRIPT_CHARS)
        self._record: EpisodeRecord | None = None

    def observation_space(self, agent: str):
        return self._observation_space

    def action_space(self, agent: str):
        return self._action_space

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self._deal(self.deck.deal(seed, options))
        self.cycle = 1
        self.agents = list(self.possible_agents)
        self.transcript: list[Turn] = []
        self._record = None
        return {a: self._observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def _deal(self, problem: Problem) -> None:
        """Make ``problem`` the item the members answer next."""
        self.problem = problem
        self.member_problems = {
            a: paraphrase(problem, v) for a, v in zip(self.possible_agents, self.views, strict=True)
        }
        self._questions = {a: render_problem(p) for a, p in self.member_problems.items()}
        self._answered: dict[str, Turn] = {}  # this item's turns, once it is answered

    def _observe(self, agent: str) -> dict[str, Any]:
        mask = np.zeros(NUM_MODES, np.int8)
        if agent in self.agents:
            mask[Mode.ANSWER] = 1
        text = self._questions[agent]
        turn = self._answered.get(agent)
        if turn is not None and turn.mode is Mode.ANSWER:
            text += "\n" + "\n".join(f"sample {g}: {s}" for g, s in enumerate(turn.samples or (turn.text,)))
        index = self.possible_agents.index(agent)
        features = np.array([index, self.views[index], len(self.possible_agents)], np.float32)
        return {
            "transcript": to_printable(text)[-MAX_TRANSCRIPT_CHARS:],
            "action_mask": mask,
            "features": features,
        }

    def _play(self, agent: str, action: Any) -> tuple[Turn, list[str | None]]:
        """The member's turn on the current item and its sample answers (none when it abstains)."""
        act = as_action(action, agent)
        if act.mode not in LEGAL_MODES:
            cost = Cost(act.calls, int(act.prompt_tokens), int(act.completion_tokens))
            return Turn(agent, "member", self.cycle, act.mode, cost=cost), []
        turn = make_turn(
            agent, "member", self.cycle, act, limit=self.max_utterance_chars, problem=self.problem,
            verdict_role=False,
        )
        if act.answer is not None and not turn.samples:
            return turn, [act.answer]
        texts, cut = turn.spoken() if turn.samples or turn.text else ((), ())
        return turn, answers_for(self.problem, texts, truncated=cut)  # code: each program's output signature

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        missing = set(self.agents) - set(actions)
        if missing or set(actions) - set(self.agents):
            raise ValueError(
                f"cohort-v0: step needs one action for each of {self.agents}; got {sorted(actions)}"
            )
        turns, answers = zip(*(self._play(agent, actions[agent]) for agent in self.agents), strict=True)
        gold = self.problem.answer if self.reward_rule == "ground_truth" else None
        result = compute_rewards(self.reward_rule, answers, self.problem.kind, gold=gold, tau=self.tau)
        rewards, infos = {}, {}
        for i, agent in enumerate(self.agents):
            sample_rewards = result.rewards[i]
            # rewards are 0/1, so this sum is exact and equals np.mean's
            rewards[agent] = sum(sample_rewards) / len(sample_rewards) if sample_rewards else 0.0
            infos[agent] = {
                "sample_answers": list(answers[i]),
                "sample_rewards": sample_rewards,
                "label": result.labels[i],
                "unlabeled": result.unlabeled[i],
                "label_correct": None if result.unlabeled[i] else grade(result.labels[i], self.problem),
            }
        self.transcript += turns
        self._answered = {t.agent: t for t in turns}
        self._record = self._make_record(answers, list(turns), rewards, infos)
        over = self.cycle == self.max_cycles
        if not over:
            self.cycle += 1
            self._deal(self.deck.deal(None, None))
        observations = {a: self._observe(a) for a in self.agents}
        done = dict.fromkeys(self.agents, over)
        if over:
            self.agents = []
        return observations, rewards, done, dict.fromkeys(done, False), infos

    def _make_record(
        self, answers: Sequence[list[str | None]], turns: list[Turn], rewards: dict, infos: dict
    ) -> EpisodeRecord:
        final, _ = plurality([a for member in answers for a in member], self.problem.kind)
        costs = {t.agent: t.cost.copy() for t in turns}
        total = Cost()
        for cost in costs.values():
            total.add(cost)
        info = {"reward_rule": self.reward_rule, "views": list(self.views), "members": infos}
        return EpisodeRecord(
            self.env_id,
            self.problem.id,
            final,
            grade(final, self.problem),
            sum(rewards.values()) / len(rewards),
            total,
            costs,
            turns,
            info,
            self.problem.images,
        )

    def turn_context(self, agent: str) -> TurnContext:
        """The member's view: its own (paraphrased) problem; ``extras["num_samples"]`` = G."""
        legal = LEGAL_MODES if agent in self.agents else ()
        features = self._observe(agent)["features"]
        return TurnContext(
            self.env_index,
            agent,
            "member",
            self.cycle,
            self.member_problems[agent],
            (),
            legal,
            features,
            {"num_samples": self.num_samples, "view": self.views[self.possible_agents.index(agent)]},
        )

    def episode_record(self) -> EpisodeRecord:
        if self._record is None:
            raise RuntimeError("cohort-v0: episode_record() is available only after a step")
        return self._record

    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        lines = [
            f"== {self.env_id} | problem {self.problem.id} | rule {self.reward_rule} "
            f"| item {self.cycle}/{self.max_cycles} =="
        ]
        for agent in self.possible_agents:
            lines.append(
                f"{agent} (view {self.views[self.possible_agents.index(agent)]}): "
                f"{self.member_problems[agent].question}"
            )
        if self._answered:
            for agent, info in self._record.info["members"].items():
                lines.append(
                    f"{agent}: answers={info['sample_answers']} label={info['label']} "
                    f"rewards={info['sample_rewards']}"
                )
        return show("\n".join(lines), self.render_mode)

    def close(self) -> None:
        pass


def raw_env(**kwargs: Any) -> ParallelToAEC:
    """The AEC form of the cohort game: PettingZoo's parallel-to-AEC conversion, with
    ``turn_context`` and ``episode_record`` forwarded (``councilzoo.envs.wrappers.ParallelToAEC``)."""
    return ParallelToAEC(parallel_env(**kwargs))


def env(**kwargs: Any) -> OrderEnforcing:
    """``raw_env`` in the order-enforcing wrapper, like every councilzoo game's ``env()``."""
    return OrderEnforcing(raw_env(**kwargs))
