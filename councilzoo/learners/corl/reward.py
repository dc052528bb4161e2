"""``CohortReward``: member ``index``'s TRL reward, one ``councilzoo/cohort-v0`` game per item
(the round's flow is in the package docstring, ``learners/corl/__init__.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from councilzoo.envs import cohort_v0
from councilzoo.envs.rewards import PEER_RULES, own_label
from councilzoo.envs.types import Action, Mode
from councilzoo.learners import engine
from councilzoo.learners.corl import metrics as M
from councilzoo.learners.corl.config import CoRLConfig
from councilzoo.learners.corl.link import CohortLink
from councilzoo.tasks import Problem, answers_for_batch

__all__ = ["CohortReward"]


class CohortReward:
    """TRL reward function of member ``index``: the cohort game's rewards (see the module docstring).

    ``label_free`` rules see problems without gold; ``golds`` feeds only the logged diagnostics.
    """

    def __init__(
        self, cfg: CoRLConfig, index: int, problems: Sequence[Problem], link: CohortLink | None = None
    ) -> None:
        self.__name__ = cfg.reward_rule
        self.cfg, self.index, self.link = cfg, index, link
        self.num_players = len(cfg.members) if cfg.reward_rule in PEER_RULES else 1
        self.me = index if self.num_players > 1 else 0
        gold_free = cfg.reward_rule != "ground_truth"
        self.problems = {p.id: dataclasses.replace(p, answer=None) if gold_free else p for p in problems}
        self.golds = {p.id: p.answer for p in problems}  # diagnostics only
        views = [m.view for m in cfg.members] if self.num_players > 1 else [cfg.members[index].view]
        self.game = cohort_v0.parallel_env(
            num_agents=self.num_players,
            reward_rule=cfg.reward_rule,
            views=views,
            num_samples=cfg.num_generations,
            tau=cfg.tau,
            problems=list(self.problems.values()),
        )
        self.trainer: Any = None
        self.last_round: dict[str, Any] = {}

    def bind(self, trainer: Any) -> None:
        self.trainer = trainer

    # -- world and cohort exchange ------------------------------------------------------------
    def _gather(self, local: list[tuple[str, str, str]]) -> list[list[tuple[str, str, str]]]:
        acc = self.trainer.accelerator if self.trainer is not None else None
        if acc is None or acc.num_processes == 1:
            return [local]
        from accelerate.utils import gather_object

        return gather_object([local])

    def _peer_labels(self, round_index: int, own: dict[str, str | None]) -> dict[str, list[str | None]]:
        """Every player's own label per item key (this member's own only, without peers)."""
        if self.num_players == 1:
            return {key: [label] for key, label in own.items()}
        acc = self.trainer.accelerator
        exchanged = [None]
        if acc.is_main_process:
            self.link.publish(round_index, own)
            exchanged = [self.link.collect(round_index, list(own))]
        if acc.num_processes > 1:
            from accelerate.utils import broadcast_object_list

            broadcast_object_list(exchanged, from_process=0)
        return exchanged[0]

    # -- the reward ---------------------------------------------------------------------------
    def __call__(self, prompts, completions, problem_id, problem_key, round, log_metric=None,
                 completion_ids=None, **_: Any):
        rounds = set(round)
        if len(rounds) != 1:
            raise RuntimeError(f"one generation batch must hold one round, got rounds {sorted(rounds)}")
        round_index = rounds.pop()
        cut = engine.cut_at_token_limit(self.trainer, completion_ids or [[]] * len(completions))
        local = [
            (k, p, engine.completion_text(c), t)
            for k, p, c, t in zip(problem_key, problem_id, completions, cut, strict=True)
        ]
        per_rank = self._gather(local)
        rank = self.trainer.accelerator.process_index if self.trainer is not None else 0
        groups: dict[str, list[str]] = {}
        truncated: dict[str, list[bool]] = {}  # cut at the token limit: the unfinished end states nothing
        ids: dict[str, str] = {}
        mine: list[tuple[str, int]] = []  # (key, position in its group) of this process's completions
        for r, entries in enumerate(per_rank):
            for key, pid, text, was_cut in entries:
                ids[key] = pid
                if r == rank:
                    mine.append((key, len(groups.get(key, ()))))
                groups.setdefault(key, []).append(text)
                truncated.setdefault(key, []).append(was_cut)
        keys = list(groups)  # code answers are output signatures: all programs run in one sandbox call
        batch = [(self.problems[ids[k]], groups[k]) for k in keys]
        answers = dict(
            zip(keys, answers_for_batch(batch, truncated=[truncated[k] for k in keys]), strict=True)
        )
        own = {k: own_label(a, self.problems[ids[k]].kind, self.cfg.tau) for k, a in answers.items()}
        labels = self._peer_labels(round_index, own)
        rewards, scored_against = {}, {}
        for key, texts in groups.items():
            rewards[key], scored_against[key] = self._play(
                self.problems[ids[key]], texts, labels[key], truncated[key]
            )
        self.last_round = {
            "round": round_index,
            "answers": answers,
            "labels": labels,
            "scored_against": scored_against,
            "ids": ids,
        }
        if log_metric is not None:
            for name, value in self.diagnostics().items():
                log_metric(name, value)
        return [rewards[key][pos] for key, pos in mine]

    def _play(
        self, problem: Problem, texts: list[str], labels: list[str | None], truncated: list[bool]
    ) -> tuple[list[float], str | None]:
        """One cohort-v0 game: this member with its samples (``truncated``: each cut at the token
        limit or not), each peer by its own label."""
        self.game.reset(options={"problem": problem})
        actions = {}
        for j, agent in enumerate(self.game.possible_agents):
            if j == self.me:
                actions[agent] = Action(Mode.ANSWER, samples=tuple(texts), samples_truncated=tuple(truncated))
            else:
                actions[agent] = Action(Mode.ANSWER, answer=labels[j])
        _, _, _, _, infos = self.game.step(actions)
        info = infos[self.game.possible_agents[self.me]]
        return list(info["sample_rewards"]), info["label"]

    def diagnostics(self) -> dict[str, float]:
        """Logged per round, from gold the rewards never saw."""
        last = self.last_round
        keys = list(last["answers"])
        kinds = [self.problems[last["ids"][k]].kind for k in keys]
        golds = [self.golds[last["ids"][k]] for k in keys]
        groups = [last["answers"][k] for k in keys]
        against = [last["scored_against"][k] for k in keys]
        out = {
            "label_accuracy": M.label_accuracy(against, golds, kinds),
            "unlabeled": sum(a is None for a in against) / max(1, len(keys)),
            "votes_per_item": sum(len(g) for g in groups) / max(1, len(keys)),  # G when the world gathered
            "oracle_reward": M.oracle_reward(groups, golds, kinds),
            "wrong_consensus": M.wrong_consensus(groups, golds, kinds),
            **M.group_diversity(groups, kinds),
        }
        if self.num_players > 1:
            own_by_player = [[last["labels"][k][j] for k in keys] for j in range(self.num_players)]
            out["agreement"] = M.pairwise_agreement(own_by_player, kinds)
        return {k: v for k, v in out.items() if v == v}  # NaN (no gold) is not logged
