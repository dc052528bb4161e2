"""A cohort of decoupled models, each trained by its own TRL ``GRPOTrainer`` in its own world.

Co-RL and its baselines are one learner with different reward rules. Each member is one
``torchrun`` / ``accelerate launch`` world (any number of processes: data parallel, ZeRO, FSDP)
that runs ``python -m councilzoo.learners.member CONFIG --member i``. The members share no
parameters and no process group; only each world's main process joins the cohort link
(``learners/distributed.py``), over which own labels travel keyed by (round, problem key).

The member's world itself is ``learners/member.py``; the launcher ``learners/launch.py``.

Per generation round TRL samples G completions of every item for the member (its own paraphrase
view), then calls ``CohortReward``, which:

1. gathers the completions of the round across the member's world (TRL spreads a prompt's G
   copies over processes), and forms the member's *own label* of each item;
2. exchanges own labels with the peers (peer rules only);
3. plays ``councilzoo/cohort-v0`` for each item, the member acting with its G texts and every
   peer by its own label (all the peer rules read of it), and returns the game's per-sample
   rewards for this process's completions.

Gold answers never reach a label-free reward: the problems the game sees carry none, and the
gold table feeds only the logged diagnostics (label accuracy, oracle reward).

``launch_cohort`` is the one command that starts a whole cohort on one node (each member on its
own devices), waits for it, and stops every member when one fails.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from councilzoo.config import config_to_dict
from councilzoo.envs import cohort_v0
from councilzoo.envs.core import Action, Mode, TurnContext
from councilzoo.envs.rewards import PEER_RULES, own_label
from councilzoo.learners import engine
from councilzoo.learners import metrics as M
from councilzoo.learners.base import Learner
from councilzoo.learners.distributed import CohortLink, DistributedConfig
from councilzoo.learners.logging import check_report_to
from councilzoo.tasks import (
    Problem,
    answers_for_batch,
    load_problems,
    paraphrase,
)

NO_FEATURES = np.zeros(3, dtype=np.float32)


@dataclass
class MemberConfig:
    """One cohort member: its own model (any family and size), view, trainer settings and devices."""

    name: str = field(metadata={"help": "Member name, used in metrics and output folders."})
    model: str = field(
        default="", metadata={"help": "Local model folder or hub name (e.g. Qwen/Qwen2.5-1.5B)."}
    )
    tiny_family: Literal["qwen3", "llama", "qwen2_5_vl", "idefics3"] | None = field(
        default=None,
        metadata={"help": "Build a tiny random model of this family instead (CPU tests/demos); "
                  "qwen2_5_vl and idefics3 are vision-language models."},
    )
    tiny_warmup_steps: int = field(
        default=40,
        metadata={
            "help": "Tiny models only: SFT steps teaching the random model to state an answer as "
            "\\boxed{X} (X drawn at random), so that it can vote."
        },
    )
    view: int = field(default=0, metadata={"help": "Paraphrase view of the items (0 = original wording)."})
    trainer: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "GRPOConfig fields for this member (over the cohort's)."}
    )
    peft: dict[str, Any] | None = field(
        default=None, metadata={"help": "LoRA: peft.LoraConfig arguments (r, lora_alpha, target_modules...)."}
    )
    num_processes: int = field(
        default=1, metadata={"help": "Processes of this member's world (data parallel)."}
    )
    devices: str | None = field(
        default=None, metadata={"help": "CUDA_VISIBLE_DEVICES of this member's world, e.g. '0,1,2,3'."}
    )
    accelerate_config: str | None = field(
        default=None,
        metadata={
            "help": "An accelerate config file (configs/accelerate/*.yaml: ZeRO-2/3, FSDP); the member "
            "then starts with `accelerate launch` instead of torchrun."
        },
    )

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ValueError(f"member name must be non-empty and contain no '/', got {self.name!r}")
        if bool(self.model) == bool(self.tiny_family):
            raise ValueError(f"member {self.name!r}: give exactly one of 'model' and 'tiny_family'")
        if self.num_processes < 1 or self.view < 0 or self.tiny_warmup_steps < 0:
            raise ValueError(f"member {self.name!r}: num_processes >= 1, view >= 0, tiny_warmup_steps >= 0")
        local = self.model.startswith(("/", ".", "~")) or self.model.count("/") != 1
        if self.model and local and not Path(self.model).expanduser().is_dir():
            raise ValueError(f"member {self.name!r}: model path {self.model!r} does not exist")
        engine.check_trainer_overrides(self.trainer, f"members[{self.name}].trainer")
        if self.accelerate_config and not Path(self.accelerate_config).is_file():
            raise ValueError(
                f"member {self.name!r}: accelerate_config {self.accelerate_config!r} does not exist"
            )


@dataclass
class DataConfig:
    """Training items: a synthetic generator or a dataset (see ``councilzoo.tasks.load_dataset``)."""

    dataset: str = field(
        default="synthetic:numeric", metadata={"help": "'synthetic:<kind>' or a dataset name."}
    )
    split: str = field(default="train", metadata={"help": "Dataset split (never an evaluation split)."})
    path: str | None = field(default=None, metadata={"help": "Local JSON/JSONL file for the dataset."})
    limit: int | None = field(default=None, metadata={"help": "Use at most this many items.", "minimum": 1})
    num_problems: int = field(default=256, metadata={"help": "Number of synthetic items.", "minimum": 1})
    difficulty: float = field(default=0.3, metadata={"help": "Synthetic difficulty in [0, 1]."})


@dataclass
class EvalConfig:
    """Held-out greedy accuracy of each member during training (original wording, no paraphrase)."""

    dataset: str | None = field(
        default=None, metadata={"help": "'synthetic:<kind>', a dataset name or 'jsonl'."}
    )
    split: str = field(default="test", metadata={"help": "Dataset split."})
    path: str | None = field(default=None, metadata={"help": "Local JSON/JSONL file for the dataset."})
    limit: int | None = field(default=None, metadata={"help": "Use at most this many items.", "minimum": 1})
    eval_steps: int = field(default=0, metadata={"help": "Evaluate every k optimizer steps (0: never)."})
    num_problems: int = field(
        default=200, metadata={"help": "Number of synthetic items (own split seed).", "minimum": 1}
    )
    difficulty: float = field(default=0.3, metadata={"help": "Synthetic difficulty in [0, 1]."})

    def __post_init__(self) -> None:
        if self.eval_steps < 0 or (self.eval_steps and not self.dataset):
            raise ValueError("eval: eval_steps must be >= 0, and > 0 needs a dataset")


@dataclass
class CohortConfig:
    """A cohort learner run; the run-level names are TRL's (output_dir, max_steps, save_steps, ...)."""

    RULES: ClassVar[tuple[str, ...]] = ("ring", "peer_majority")
    MIN_MEMBERS: ClassVar[int] = 2

    members: list[MemberConfig] = field(
        metadata={"help": "The cohort; each member trains on its own rewards."}
    )
    reward_rule: str = field(
        default="ring", metadata={"help": "How each member's label is formed (see docs)."}
    )
    tau: float = field(default=0.0, metadata={"help": "Minimum plurality share for a label (0 in Co-RL)."})
    num_generations: int = field(default=8, metadata={"help": "G: completions per item and member."})
    prompts_per_step: int = field(default=16, metadata={"help": "Items per generation round."})
    max_steps: int = field(default=100, metadata={"help": "Optimizer steps (TRL's max_steps)."})
    max_completion_length: int = field(default=1024, metadata={"help": "Longest completion (tokens)."})
    seed: int = field(default=0, metadata={"help": "Run seed: data order, sampling, tiny models."})
    output_dir: str = field(
        default="runs/corl", metadata={"help": "Run folder; members write members/<name>/."}
    )
    tiny_models_dir: str | None = field(
        default=None,
        metadata={"help": "Where tiny_family models are built (reused if present); default OUTPUT/models."},
    )
    save_steps: int = field(
        default=0, metadata={"help": "Checkpoint every k optimizer steps (0: only at the end)."}
    )
    report_to: list[str] = field(
        default_factory=lambda: ["none"], metadata={"help": "tensorboard, wandb, trackio."}
    )
    project: str = field(
        default="councilzoo", metadata={"help": "wandb project / trackio space; members group under it."}
    )
    data: DataConfig = field(default_factory=DataConfig, metadata={"help": "Training items."})
    eval: EvalConfig = field(
        default_factory=EvalConfig, metadata={"help": "Held-out accuracy while training."}
    )
    trainer: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "GRPOConfig fields for every member (learning_rate, bf16, ...)."},
    )
    distributed: DistributedConfig = field(
        default_factory=DistributedConfig, metadata={"help": "Cohort link: store, heartbeat, timeouts."}
    )
    warm_start: bool = field(
        default=False,
        metadata={
            "help": "Fork single-process member worlds from a server that imported torch, transformers "
            "and TRL once (saves ~6 s of start-up per world, for many short runs); what a library reads "
            "from the environment at import keeps its value from the server's start."
        },
    )
    seeded_sampling: bool = field(
        default=False,
        metadata={
            "help": "Seed each item's G samples by (seed, step, item): the same samples and update for any "
            "number of processes (one generate call per item; transformers, text models)."
        },
    )

    def __post_init__(self) -> None:
        if self.reward_rule not in self.RULES:
            raise ValueError(
                f"reward_rule must be one of {self.RULES} for {type(self).__name__}, got {self.reward_rule!r}"
            )
        if len(self.members) < self.MIN_MEMBERS:
            raise ValueError(
                f"{type(self).__name__} needs >= {self.MIN_MEMBERS} members, got {len(self.members)}"
            )
        names = [m.name for m in self.members]
        if len(set(names)) != len(names):
            raise ValueError(f"member names must be unique, got {names}")
        if self.num_generations < 2:
            raise ValueError("num_generations must be >= 2 (group-normalised advantages)")
        for name in ("prompts_per_step", "max_steps", "max_completion_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.save_steps < 0:
            raise ValueError(f"save_steps must be >= 0, got {self.save_steps}")
        if not 0.0 <= self.tau <= 1.0:
            raise ValueError(f"tau must be in [0, 1], got {self.tau}")
        engine.check_trainer_overrides(self.trainer, "trainer")
        check_report_to(self.report_to)
        if self.seeded_sampling:
            for i, member in enumerate(self.members):
                check_seeded_sampling({**self.trainer, **member.trainer}, f"members[{i}] ({member.name})")

    def member_dir(self, index: int) -> Path:
        return Path(self.output_dir) / "members" / self.members[index].name

    def fingerprint(self) -> str:
        """Hash of the resolved config: members of one cohort must agree on it to join."""
        return hashlib.sha256(json.dumps(config_to_dict(self), sort_keys=True).encode()).hexdigest()[:16]


# GRPOConfig sampling settings that SeededSampling does not apply, with their defaults.
UNSEEDED_SETTINGS = {
    "use_vllm": False, "top_k": 0, "min_p": None, "repetition_penalty": 1.0, "generation_kwargs": None
}


def check_seeded_sampling(settings: dict[str, Any], where: str) -> None:
    """``seeded_sampling`` samples with temperature, top_p and max_completion_length only."""
    changed = sorted(k for k, default in UNSEEDED_SETTINGS.items() if settings.get(k, default) != default)
    if changed:
        raise ValueError(f"{where}: seeded_sampling does not apply trainer settings {changed}")


def load_items(data: DataConfig | EvalConfig, seed: int) -> list[Problem]:
    """Training or held-out items through the one problem source (``tasks.load_problems``)."""
    return load_problems(
        data.dataset,
        data.split,
        seed=seed,
        path=data.path,
        limit=data.limit,
        size=data.num_problems,
        difficulty=data.difficulty,
    )


def member_prompt(problem: Problem, view: int, with_images: bool = False) -> list[dict]:
    """The chat prompt a member answers: the game's member turn for its paraphrase view. A
    vision-language member sees the problem's images; a text-only member the text and a note."""
    from councilzoo.agents.prompts import render_messages

    problem = paraphrase(problem, view)
    ctx = TurnContext(0, "member", "member", 0, problem, (), (Mode.ANSWER,), NO_FEATURES)
    return render_messages(ctx, with_images=with_images)


# --- the reward: one cohort-v0 game per item ----------------------------------------------------


class CohortReward:
    """TRL reward function of member ``index``: the cohort game's rewards (see the module docstring).

    ``label_free`` rules see problems without gold; ``golds`` feeds only the logged diagnostics.
    """

    def __init__(
        self, cfg: CohortConfig, index: int, problems: Sequence[Problem], link: CohortLink | None = None
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
    def __call__(self, prompts, completions, problem_id, problem_key, round, log_metric=None, **_: Any):
        rounds = set(round)
        if len(rounds) != 1:
            raise RuntimeError(f"one generation batch must hold one round, got rounds {sorted(rounds)}")
        round_index = rounds.pop()
        local = [
            (k, p, engine.completion_text(c))
            for k, p, c in zip(problem_key, problem_id, completions, strict=True)
        ]
        per_rank = self._gather(local)
        rank = self.trainer.accelerator.process_index if self.trainer is not None else 0
        groups: dict[str, list[str]] = {}
        ids: dict[str, str] = {}
        mine: list[tuple[str, int]] = []  # (key, position in its group) of this process's completions
        for r, entries in enumerate(per_rank):
            for key, pid, text in entries:
                ids[key] = pid
                if r == rank:
                    mine.append((key, len(groups.get(key, ()))))
                groups.setdefault(key, []).append(text)
        keys = list(groups)  # code answers are output signatures: all programs run in one sandbox call
        answers = dict(
            zip(keys, answers_for_batch([(self.problems[ids[k]], groups[k]) for k in keys]), strict=True)
        )
        own = {k: own_label(a, self.problems[ids[k]].kind, self.cfg.tau) for k, a in answers.items()}
        labels = self._peer_labels(round_index, own)
        rewards, scored_against = {}, {}
        for key, texts in groups.items():
            rewards[key], scored_against[key] = self._play(self.problems[ids[key]], texts, labels[key])
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
        self, problem: Problem, texts: list[str], labels: list[str | None]
    ) -> tuple[list[float], str | None]:
        """One cohort-v0 game: this member with its samples, each peer by its own label."""
        self.game.reset(options={"problem": problem})
        actions = {}
        for j, agent in enumerate(self.game.possible_agents):
            if j == self.me:
                actions[agent] = Action(Mode.ANSWER, samples=tuple(texts))
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


class CohortLearner(Learner):
    """A learner whose members are cohort worlds; subclasses name it and may swap the rewards."""

    config_class = CohortConfig

    @staticmethod
    def reward_functions(cfg: CohortConfig, index: int, problems: Sequence[Problem], link) -> list:
        """The member's TRL reward functions."""
        return [CohortReward(cfg, index, problems, link)]

    def train(
        self, resume: bool = False, overwrite: bool = False, members: Sequence[int] | None = None
    ) -> list[dict]:
        from councilzoo.learners.launch import launch_cohort

        spec = f"{type(self).__module__}:{type(self).__qualname__}"  # what the member worlds import
        return launch_cohort(self.cfg, spec, members=members, resume=resume, overwrite=overwrite)
