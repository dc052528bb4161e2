"""A cohort of decoupled models, each trained by its own TRL ``GRPOTrainer`` in its own world.

Co-RL and its baselines are one learner with different reward rules. Each member is one
``torchrun`` / ``accelerate launch`` world (any number of processes: data parallel, ZeRO, FSDP)
that runs ``python -m councilzoo.learners.cohort CONFIG --member i``. The members share no
parameters and no process group; only each world's main process joins the cohort link
(``learners/distributed.py``), over which own labels travel keyed by (round, problem key).

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

import argparse
import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from councilzoo.config import config_to_dict, load_config
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
    extract_answer,
    format_answer,
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
    tiny_family: Literal["qwen3", "llama"] | None = field(
        default=None, metadata={"help": "Build a tiny random model of this family instead (CPU tests/demos)."}
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
    limit: int | None = field(default=None, metadata={"help": "Use at most this many items."})
    num_problems: int = field(default=256, metadata={"help": "Number of synthetic items."})
    difficulty: float = field(default=0.3, metadata={"help": "Synthetic difficulty in [0, 1]."})


@dataclass
class EvalConfig:
    """Held-out greedy accuracy of each member during training (original wording, no paraphrase)."""

    dataset: str | None = field(
        default=None, metadata={"help": "'synthetic:<kind>', a dataset name or 'jsonl'."}
    )
    split: str = field(default="test", metadata={"help": "Dataset split."})
    path: str | None = field(default=None, metadata={"help": "Local JSON/JSONL file for the dataset."})
    limit: int | None = field(default=None, metadata={"help": "Use at most this many items."})
    eval_steps: int = field(default=0, metadata={"help": "Evaluate every k optimizer steps (0: never)."})
    num_problems: int = field(default=200, metadata={"help": "Number of synthetic items (own split seed)."})
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

    def member_dir(self, index: int) -> Path:
        return Path(self.output_dir) / "members" / self.members[index].name

    def fingerprint(self) -> str:
        """Hash of the resolved config: members of one cohort must agree on it to join."""
        return hashlib.sha256(json.dumps(config_to_dict(self), sort_keys=True).encode()).hexdigest()[:16]


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


class HeldOutAccuracy(engine.MetricsFile):
    """Greedy accuracy of the member on held-out items before training and every ``eval_steps``
    optimizer steps (and at the end), one JSON line per evaluation in ``path`` (main process)."""

    def __init__(self, path: Path, problems: Sequence[Problem], every: int, max_new_tokens: int) -> None:
        super().__init__(path)
        self.problems, self.every, self.max_new_tokens = list(problems), every, max_new_tokens

    def _evaluate(self, state, model, processing_class) -> None:
        from councilzoo.agents.base import Sampling
        from councilzoo.agents.generators.transformers_backend import TransformersGenerator
        from councilzoo.tasks import answers_equivalent

        generator = TransformersGenerator(getattr(model, "module", model), tokenizer=processing_class)
        prompts = [member_prompt(p, 0) for p in self.problems]
        greedy = Sampling(max_new_tokens=self.max_new_tokens, temperature=0.0)
        texts = [g[0].text for g in generator.generate(prompts, n=1, sampling=greedy)]
        hits = [
            answers_equivalent(extract_answer(t, p.kind), p.answer, p.kind)
            for t, p in zip(texts, self.problems, strict=True)
        ]
        with self.path.open("a") as fh:
            fh.write(json.dumps({"step": state.global_step, "accuracy": sum(hits) / len(hits)}) + "\n")

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
        if state.is_world_process_zero and state.global_step == 0:
            self._evaluate(state, model, processing_class)

    def on_log(self, args, state, control, logs=None, **kwargs):
        return None

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        due = state.global_step % self.every == 0 or state.global_step == state.max_steps
        if state.is_world_process_zero and due:
            self._evaluate(state, model, processing_class)


def member_prompt(problem: Problem, view: int) -> list[dict[str, str]]:
    """The chat prompt a member answers: the game's member turn for its paraphrase view."""
    from councilzoo.agents.prompts import render_messages

    problem = paraphrase(problem, view)
    return render_messages(TurnContext(0, "member", "member", 0, problem, (), (Mode.ANSWER,), NO_FEATURES))


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


# --- one member's world ---------------------------------------------------------------------------


def member_args(cfg: CohortConfig, index: int) -> Any:
    """The member's ``GRPOConfig`` (cohort trainer settings, then the member's own)."""
    member = cfg.members[index]
    return engine.grpo_args(
        output_dir=cfg.member_dir(index),
        max_steps=cfg.max_steps,
        seed=cfg.seed,
        save_steps=cfg.save_steps,
        report_to=cfg.report_to,
        num_generations=cfg.num_generations,
        prompts_per_round=cfg.prompts_per_step,
        max_completion_length=cfg.max_completion_length,
        run_name=f"{Path(cfg.output_dir).name}-{member.name}",
        overrides={**cfg.trainer, **member.trainer},
    )


def member_model_path(cfg: CohortConfig, index: int) -> str:
    """The member's model folder: a resolved local/hub model, or its built tiny model."""
    from councilzoo.agents.generators.common import resolve_model_path

    member = cfg.members[index]
    if member.tiny_family:
        return str(_tiny_model_dir(cfg, index))
    return resolve_model_path(member.model)


def _tiny_model_dir(cfg: CohortConfig, index: int) -> Path:
    root = Path(cfg.tiny_models_dir) if cfg.tiny_models_dir else Path(cfg.output_dir) / "models"
    member = cfg.members[index]
    return root / (member.name if member.tiny_warmup_steps else f"{member.name}-base")


def build_tiny_models(cfg: CohortConfig, problems: Sequence[Problem]) -> None:
    """Build (or reuse) every tiny_family member's model, warmed up to state answers."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from councilzoo.testing import build_tiny_model

    for index, member in enumerate(cfg.members):
        if not member.tiny_family:
            continue
        root = _tiny_model_dir(cfg, index).parent
        base = build_tiny_model(
            root / f"{member.name}-base", family=member.tiny_family, seed=cfg.seed + index
        )
        if not member.tiny_warmup_steps:
            continue
        spec = {
            "steps": member.tiny_warmup_steps,
            "seed": cfg.seed + index,
            "view": member.view,
            "data": config_to_dict(cfg.data),
            "family": member.tiny_family,
        }
        warm = root / member.name
        marker = warm / "councilzoo_warmup.json"
        if marker.is_file() and json.loads(marker.read_text()) == spec:
            continue
        model, tokenizer = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
        warm_up(model, tokenizer, problems[:64], member.tiny_warmup_steps, cfg.seed + index, view=member.view)
        model.save_pretrained(warm)
        tokenizer.save_pretrained(warm)
        marker.write_text(json.dumps(spec))  # written last: marks a complete build


def warm_up(
    model: Any,
    tokenizer: Any,
    problems: Sequence[Problem],
    steps: int,
    seed: int,
    *,
    view: int = 0,
    lr: float = 3e-3,
) -> None:
    """Teach a random tiny model to state one of each problem's answer forms (``warmup_answers``)
    after the member prompt of ``view``, so that votes, labels and rewards are non-trivial."""
    prompts = [member_prompt(p, view) for p in problems]
    teach_answer_format(model, tokenizer, prompts, [warmup_answers(p) for p in problems], steps, seed, lr=lr)


def warmup_answers(problem: Problem) -> list[str]:
    """What a warmed-up tiny model may answer: a random letter, or for code one of the problem's
    programs (its solution or a wrong one), each in the canonical answer format."""
    if problem.kind == "code":
        programs = [problem.metadata["solution"], *problem.metadata.get("distractors", ())]
        return [format_answer(program, "code") for program in programs]
    return [f"The answer is {format_answer(letter, 'multiple_choice')}." for letter in "ABCD"]


def teach_answer_format(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[list[dict[str, str]]],
    targets: Sequence[Sequence[str]],
    steps: int,
    seed: int,
    lr: float = 3e-3,
    batch_size: int = 16,
) -> None:
    """A few SFT steps on ``prompt -> target``, the target drawn uniformly from the prompt's own
    ``targets``: a random tiny model then states (random) answers, so labels, votes and rewards
    are non-trivial on CPU. Test scaffolding for random models, not a policy update."""
    import torch

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    device = next(model.parameters()).device
    model.train()
    for _ in range(steps):
        rows, masks = [], []
        for i in rng.integers(0, len(prompts), size=batch_size):
            prompt = tokenizer.apply_chat_template(prompts[i], add_generation_prompt=True, tokenize=False)
            answer = targets[i][rng.integers(len(targets[i]))] + tokenizer.eos_token
            p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            a_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
            rows.append(p_ids + a_ids)
            masks.append([0] * len(p_ids) + [1] * len(a_ids))
        width = max(map(len, rows))
        ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
        labels = torch.tensor([m + [0] * (width - len(m)) for m in masks])
        attention = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        ids, labels, attention = (t.to(device) for t in (ids, labels, attention))
        loss = model(input_ids=ids, attention_mask=attention, labels=ids.masked_fill(labels == 0, -100)).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def _resume_checkpoint(cfg: CohortConfig, index: int, link: CohortLink | None, resume: bool) -> str | None:
    """The checkpoint every member has (the newest common step), or None to start fresh."""
    mine = engine.checkpoint_steps(cfg.member_dir(index)) if resume else []
    steps = link.agree_on_checkpoint(mine) if link is not None else (max(mine) if mine else None)
    return str(cfg.member_dir(index) / f"checkpoint-{steps}") if steps is not None else None


def run_member(
    cfg: CohortConfig,
    index: int,
    reward_functions: Callable[..., list],
    resume: bool = False,
    callbacks: Sequence[Any] = (),
) -> dict[str, float]:
    """Train member ``index`` in this process's world; returns its last logged row (main process).

    ``reward_functions(cfg, index, problems, link)`` gives the learner's TRL reward functions.
    Peer rules join the cohort link from the world's main process; every member must agree on the
    config fingerprint and on the checkpoint to resume from.
    """
    quiet_loading()
    args = member_args(cfg, index)
    problems = load_items(cfg.data, cfg.seed)
    model_path = member_model_path(cfg, index)
    member = cfg.members[index]
    view = member.view
    rows = engine.problem_rows(
        problems, cfg.seed, engine.rounds_needed(args), cfg.prompts_per_step, lambda p: member_prompt(p, view)
    )
    rank = int(os.environ.get("RANK", "0"))
    link = None
    if cfg.reward_rule in PEER_RULES and rank == 0:
        link = CohortLink(
            cfg.distributed, index, len(cfg.members), run_id="cohort", fingerprint=cfg.fingerprint()
        )
    _tracker_env(cfg, member.name)
    if cfg.eval.eval_steps:
        held_out = load_items(cfg.eval, cfg.seed)
        callbacks = [
            *callbacks,
            HeldOutAccuracy(
                cfg.member_dir(index) / "eval.jsonl", held_out, cfg.eval.eval_steps, cfg.max_completion_length
            ),
        ]
    cbs = [
        engine.MetricsFile(cfg.member_dir(index) / "metrics.jsonl"),
        engine.StepProgress(member.name, index),
        *callbacks,
    ]
    with link if link is not None else _nullcontext():
        checkpoint = _resume_checkpoint(cfg, index, link, resume) if rank == 0 else None
        checkpoint = _broadcast_from_main(checkpoint)
        trainer = engine.build_trainer(
            model_path, model_path, args, rows, reward_functions(cfg, index, problems, link), cbs, member.peft
        )
        trainer.train(resume_from_checkpoint=checkpoint)
        final = cfg.member_dir(index) / "final"
        trainer.save_model(str(final))
        if trainer.accelerator.is_main_process:
            trainer.processing_class.save_pretrained(str(final))
    history = [r for r in trainer.state.log_history if "reward" in r]
    return history[-1] if history else {}


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None


def _broadcast_from_main(value: Any) -> Any:
    """``value`` of world rank 0 on every rank (a no-op outside a distributed world)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _tracker_env(cfg: CohortConfig, member: str) -> None:
    """Per-member trackers: one wandb run per member (stable id, so a resume continues it), grouped
    by the cohort's run; TensorBoard writes under the member's own folder."""
    run = Path(cfg.output_dir).name
    os.environ.setdefault("WANDB_PROJECT", cfg.project)
    os.environ.setdefault("WANDB_RUN_GROUP", run)
    os.environ.setdefault(
        "WANDB_RUN_ID", hashlib.sha256(f"{cfg.fingerprint()}/{member}".encode()).hexdigest()[:12]
    )
    os.environ.setdefault("WANDB_RESUME", "allow")
    os.environ.setdefault("TRACKIO_PROJECT", cfg.project)


def quiet_loading() -> None:
    """No per-file loading bars from transformers and the hub: the step bars are the progress."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m councilzoo.learners.cohort CONFIG --learner NAME --member I``: one member's world."""
    from councilzoo.learners.base import get_learner

    parser = argparse.ArgumentParser(prog="councilzoo.learners.cohort")
    parser.add_argument("config")
    parser.add_argument("--learner", required=True)
    parser.add_argument("--member", type=int, required=True)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)
    learner = get_learner(args.learner)
    cfg = load_config(args.config, learner.config_class)
    run_member(cfg, args.member, learner.reward_functions, resume=args.resume)
    return 0


if __name__ == "__main__":
    sys.exit(main())
