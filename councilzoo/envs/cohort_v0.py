"""
# Cohort (Co-RL)

Co-RL's cooperative label-free step as a one-shot parallel PettingZoo game: N members answer the
same item (each possibly its own paraphrase) with G samples, and each sample is rewarded by a
named rule, typically against a *peer's* label.

| Creation           | `make("councilzoo/cohort-v0", num_agents=2, reward_rule="ring")`        |
|--------------------|--------------------------------------------------------------------------|
| Actions            | Discrete(8) mode; ANSWER with `Action.samples` = the member's G texts    |
| Parallel API       | Yes (native); `env()` is its AEC conversion                              |
| Agents             | `['member_0', ..., 'member_{N-1}']`                                      |
| Roles              | `member`                                                                 |
| Legal modes        | ANSWER                                                                   |
| Observation        | Dict(transcript=Text, action_mask=Box(int8, 8), features=Box(f32, 3))    |
| Reward             | mean of the member's per-sample rewards under `reward_rule`              |

### Rules

`reset` deals one problem. Member n sees the question `paraphrase(problem, views[n])` (`views`
defaults to all 0, the original text; labels are paired by problem id, never by surface form).
One `step` takes every member's ANSWER action: `Action.samples` holds its G sampled texts (no
samples: `text` alone; with `Action.answer` and no samples, that answer). Each sample's answer
is `answers_for(problem, samples)`: `extract_answer(sample, kind)`, and for code problems the
output signature of the sample's program on the test inputs. The rewards then come from
`councilzoo.envs.rewards.compute_rewards(reward_rule, answers, kind, gold, tau)` and the
episode ends.

### Reward rules

`ground_truth` (gold answer), `ring` (member n is taught by member n+1 mod N, the Co-RL
release), `peer_majority` (plurality of the other members' labels, ties -> unlabeled),
`self_majority` (TTRL). A sample scores 1 when its answer is equivalent to the member's label,
else 0; an unlabeled member scores 0 on every sample. Under the peer rules the gold answer never
enters a reward and a member's reward never depends on its own label.

### Observation space

`transcript`: the member's own question (after the step, also its sampled answers).
`features` (`FEATURE_NAMES`): member_index, view (paraphrase index), num_members.

### Infos

Per member after the step: `sample_answers`, `sample_rewards`, `label`, `unlabeled`, and the
diagnostic `label_correct` (label vs gold; None without gold; never used by peer rules).
The episode record's final answer is the plurality of all members' sample answers (member order).

### Arguments

`num_agents` (2), `reward_rule` ("ring"), `views` (None = all 0), `num_samples` (8, the G
agents are asked for, in `TurnContext.extras`), `tau` (0.0, label share threshold), `problems`,
`max_utterance_chars` (8000), `render_mode`.

### Version history

* v0: initial release.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

from councilzoo.envs.base import (
    MAX_TRANSCRIPT_CHARS,
    MAX_UTTERANCE_CHARS,
    IllegalModeError,
    ProblemDeck,
    as_action,
    build_spaces,
    grade,
    make_turn,
    render_problem,
    to_printable,
)
from councilzoo.envs.core import NUM_MODES, Cost, EpisodeRecord, Mode, Turn, TurnContext
from councilzoo.envs.rewards import RULES, compute_rewards
from councilzoo.tasks import Problem, answers_for, paraphrase, plurality

FEATURE_NAMES = ("member_index", "view", "num_members")
MEMBER_INDEX, VIEW, NUM_MEMBERS = range(len(FEATURE_NAMES))
LEGAL_MODES = (Mode.ANSWER,)


class parallel_env(ParallelEnv):
    """Co-RL's cohort step (see the module docstring)."""

    metadata = {"name": "cohort_v0", "render_modes": ["ansi"], "is_parallelizable": True}
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
        problems: Iterable[Problem] | None = None,
        max_utterance_chars: int = MAX_UTTERANCE_CHARS,
        render_mode: str | None = None,
    ) -> None:
        if int(num_agents) != num_agents or num_agents < 1:
            raise ValueError(f"cohort-v0: num_agents must be an integer >= 1, got {num_agents!r}")
        if reward_rule not in RULES:
            raise ValueError(f"cohort-v0: reward_rule must be one of {RULES}, got {reward_rule!r}")
        if reward_rule in ("ring", "peer_majority") and num_agents < 2:
            raise ValueError(f"cohort-v0: reward_rule {reward_rule!r} needs num_agents >= 2")
        views = [0] * num_agents if views is None else [int(v) for v in views]
        if len(views) != num_agents or min(views) < 0:
            raise ValueError(f"cohort-v0: views must hold {num_agents} indices >= 0, got {views!r}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"cohort-v0: render_mode must be None or 'ansi', got {render_mode!r}")
        self.possible_agents = [f"member_{i}" for i in range(num_agents)]
        self.roles = dict.fromkeys(self.possible_agents, "member")
        self.reward_rule, self.views, self.tau = reward_rule, views, float(tau)
        self.num_samples, self.max_utterance_chars = int(num_samples), max_utterance_chars
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
        self.problem: Problem = self.deck.deal(seed, options)
        self.member_problems = {
            a: paraphrase(self.problem, v) for a, v in zip(self.possible_agents, self.views, strict=True)
        }
        self._questions = {a: render_problem(p) for a, p in self.member_problems.items()}
        self.agents = list(self.possible_agents)
        self.transcript: list[Turn] = []
        self._record = None
        return {a: self._observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def _observe(self, agent: str) -> dict[str, Any]:
        mask = np.zeros(NUM_MODES, np.int8)
        if agent in self.agents:
            mask[Mode.ANSWER] = 1
        text = self._questions[agent]
        for turn in self.transcript:
            if turn.agent == agent:
                text += "\n" + "\n".join(
                    f"sample {g}: {s}" for g, s in enumerate(turn.samples or (turn.text,))
                )
        index = self.possible_agents.index(agent)
        features = np.array([index, self.views[index], len(self.possible_agents)], np.float32)
        return {
            "transcript": to_printable(text)[-MAX_TRANSCRIPT_CHARS:],
            "action_mask": mask,
            "features": features,
        }

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        missing = set(self.agents) - set(actions)
        if missing or set(actions) - set(self.agents):
            raise ValueError(
                f"cohort-v0: step needs one action for each of {self.agents}; got {sorted(actions)}"
            )
        kind = self.problem.kind
        answers: list[list[str | None]] = []
        for agent in self.agents:
            act = as_action(actions[agent], agent)
            if act.mode not in LEGAL_MODES:
                raise IllegalModeError(
                    f"agent {agent!r} (role 'member') chose mode {act.mode.name}; legal modes: ['ANSWER']"
                )
            turn = make_turn(
                agent, "member", 1, act, limit=self.max_utterance_chars, kind=kind, verdict_role=False
            )
            texts = turn.samples or ((turn.text,) if turn.text else ())
            if act.answer is not None and not turn.samples and kind != "code":
                answers.append([act.answer])
            else:  # code: each sample's output signature (its program run on the test inputs)
                answers.append(answers_for(self.problem, texts))
            self.transcript.append(turn)
        gold = self.problem.answer if self.reward_rule == "ground_truth" else None
        result = compute_rewards(self.reward_rule, answers, kind, gold=gold, tau=self.tau)
        rewards, infos = {}, {}
        for i, agent in enumerate(self.agents):
            sample_rewards = result.rewards[i]
            # rewards are 0/1, so this sum is exact and equals np.mean's
            rewards[agent] = sum(sample_rewards) / len(sample_rewards) if sample_rewards else 0.0
            infos[agent] = {
                "sample_answers": answers[i],
                "sample_rewards": sample_rewards,
                "label": result.labels[i],
                "unlabeled": result.unlabeled[i],
                "label_correct": None if result.unlabeled[i] else grade(result.labels[i], self.problem),
            }
        self._record = self._make_record(answers, rewards, infos)
        observations = {a: self._observe(a) for a in self.agents}
        done = dict.fromkeys(self.agents, True)
        self.agents = []
        return observations, rewards, done, dict.fromkeys(done, False), infos

    def _make_record(self, answers: list[list[str | None]], rewards: dict, infos: dict) -> EpisodeRecord:
        final, _ = plurality([a for member in answers for a in member], self.problem.kind)
        costs = {t.agent: t.cost.copy() for t in self.transcript}
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
            list(self.transcript),
            info,
        )

    def turn_context(self, agent: str) -> TurnContext:
        """The member's view: its own (paraphrased) problem; ``extras["num_samples"]`` = G."""
        legal = LEGAL_MODES if agent in self.agents else ()
        features = self._observe(agent)["features"]
        return TurnContext(
            self.env_index,
            agent,
            "member",
            1,
            self.member_problems[agent],
            (),
            legal,
            features,
            {"num_samples": self.num_samples, "view": self.views[self.possible_agents.index(agent)]},
        )

    def episode_record(self) -> EpisodeRecord:
        if self._record is None:
            raise RuntimeError("cohort-v0: episode_record() is available only after the step")
        return self._record

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        lines = [f"== {self.env_id} | problem {self.problem.id} | rule {self.reward_rule} =="]
        for agent in self.possible_agents:
            lines.append(
                f"{agent} (view {self.views[self.possible_agents.index(agent)]}): "
                f"{self.member_problems[agent].question}"
            )
        if self._record is not None:
            for agent, info in self._record.info["members"].items():
                lines.append(
                    f"{agent}: answers={info['sample_answers']} label={info['label']} "
                    f"rewards={info['sample_rewards']}"
                )
        return "\n".join(lines)

    def close(self) -> None:
        pass


def raw_env(**kwargs: Any):
    """The AEC form of the cohort game (PettingZoo's parallel_to_aec conversion)."""
    return parallel_to_aec(parallel_env(**kwargs))


def env(**kwargs: Any):
    """Same as ``raw_env``: the conversion already enforces call order."""
    return raw_env(**kwargs)
