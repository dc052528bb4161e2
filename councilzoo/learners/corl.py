"""Co-RL: cooperative label-free RL across a cohort of decoupled models (REFERENCE 1).

Each step, for a batch of items: every member n samples G completions of its own view of each
item (``paraphrase(problem, view_n)``); its *own label* is the plurality of its answers; member n
is rewarded against a *peer's* label under the rule named in the config (``ring``: member
(n+1) mod N; ``peer_majority``: plurality of the other members' labels, ties -> unlabeled), by
``councilzoo.envs.rewards.compute_rewards``, the cohort env's own rule; then each member takes one
GSPO/GRPO step (``PolicyUpdater``) on its own rewards. Labels are paired by problem id, never by
surface form or position. Gold answers only feed logged diagnostics (label accuracy, oracle
reward).

``CohortLearner`` is the shared machinery: with every member local it steps them in lockstep in
one process; given a ``CohortLink`` and one member index it runs that member alone and exchanges
own labels with peers in other processes (``learners/distributed.py``). The baselines
(``learners/baselines.py``) are the same learner with other reward rules.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from councilzoo.agents.base import Completion, Sampling
from councilzoo.agents.prompts import render_messages
from councilzoo.config import config_to_dict, write_run_files
from councilzoo.envs.core import Mode, TurnContext
from councilzoo.envs.rewards import compute_rewards, own_label
from councilzoo.learners import metrics as M
from councilzoo.learners.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from councilzoo.learners.distributed import CohortLink, DistributedConfig
from councilzoo.learners.logging import REPORT_TO, MetricsLogger, check_report_to
from councilzoo.learners.policy_update import PolicyUpdateConfig, PolicyUpdater, RolloutBatch
from councilzoo.tasks import Problem, extract_answer, load_dataset, paraphrase, synthetic_problems

NO_FEATURES = np.zeros(3, dtype=np.float32)


@dataclass
class MemberConfig:
    """One cohort member: its own model (any family and size) and its own view of the items."""

    name: str = field(metadata={"help": "Member name, used in metrics and checkpoint folders."})
    model: str = field(
        default="", metadata={"help": "Local model folder or hub name (e.g. Qwen/Qwen2.5-1.5B)."}
    )
    tiny_family: Literal["qwen3", "llama"] | None = field(
        default=None, metadata={"help": "Build a tiny random model of this family instead (CPU tests/demos)."}
    )
    tiny_warmup_steps: int = field(
        default=40,
        metadata={
            "help": "Tiny models only: SFT steps teaching the random model to state "
            "an answer as \\boxed{X} (X drawn at random), so that it can vote."
        },
    )
    view: int = field(default=0, metadata={"help": "Paraphrase view of the items (0 = original wording)."})
    learning_rate: float | None = field(default=None, metadata={"help": "Overrides policy.learning_rate."})
    device: str = field(default="cpu", metadata={"help": "torch device for this member's model."})
    dtype: Literal["float32", "bfloat16", "float16"] = field(
        default="float32", metadata={"help": "Weights dtype."}
    )
    generator: Literal["transformers", "vllm"] = field(
        default="transformers", metadata={"help": "Sampling backend; vllm runs colocated with training."}
    )
    vllm: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "Extra VLLMGenerator arguments (gpu_memory_utilization, ...)."},
    )

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("member name must not be empty")
        if bool(self.model) == bool(self.tiny_family):
            raise ValueError(f"member {self.name!r}: give exactly one of 'model' and 'tiny_family'")
        local = self.model.startswith(("/", ".", "~")) or self.model.count("/") != 1
        if self.model and local and not Path(self.model).expanduser().is_dir():
            raise ValueError(f"member {self.name!r}: model path {self.model!r} does not exist")


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
class CohortConfig:
    """Everything a cohort learner run needs; subclasses fix which reward rules are allowed."""

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
    prompts_per_step: int = field(default=16, metadata={"help": "Items per step."})
    max_steps: int = field(default=100, metadata={"help": "Training steps."})
    max_new_tokens: int = field(default=1024, metadata={"help": "Longest completion (tokens)."})
    top_p: float = field(
        default=1.0, metadata={"help": "Nucleus sampling (temperature is policy.temperature)."}
    )
    seed: int = field(default=0, metadata={"help": "Run seed: data order, sampling, tiny models."})
    output_dir: str = field(default="runs/corl", metadata={"help": "Metrics, checkpoints and final weights."})
    tiny_models_dir: str | None = field(
        default=None,
        metadata={"help": "Where tiny_family models are built (reused if present); default OUTPUT/models."},
    )
    save_steps: int = field(default=0, metadata={"help": "Checkpoint every k steps (0: only at the end)."})
    keep_last: int = field(default=2, metadata={"help": "Checkpoints kept."})
    report_to: list[str] = field(default_factory=lambda: ["none"], metadata={"help": f"Any of {REPORT_TO}."})
    project: str = field(default="councilzoo", metadata={"help": "Project name for wandb / trackio."})
    data: DataConfig = field(default_factory=DataConfig, metadata={"help": "Training items."})
    policy: PolicyUpdateConfig = field(
        default_factory=PolicyUpdateConfig, metadata={"help": "GSPO/GRPO step."}
    )
    distributed: DistributedConfig = field(
        default_factory=DistributedConfig, metadata={"help": "Multi-process mode: store, heartbeat."}
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
        for name in ("prompts_per_step", "max_steps", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        check_report_to(self.report_to)


@dataclass
class CoRLConfig(CohortConfig):
    """Co-RL: N >= 2 members rewarded by peer labels (``ring`` or ``peer_majority``)."""


@dataclass
class Member:
    """A live member: model, tokenizer, sampler and optimiser."""

    index: int
    cfg: MemberConfig
    model: Any
    tokenizer: Any
    generator: Any
    updater: PolicyUpdater


def load_problems(data: DataConfig, seed: int) -> list[Problem]:
    if data.dataset.startswith("synthetic:"):
        problems = synthetic_problems(data.dataset.split(":", 1)[1], data.num_problems, seed, data.difficulty)
    else:
        problems = load_dataset(data.dataset, split=data.split, path=data.path, seed=seed)
    return problems[: data.limit] if data.limit else problems


def cohort_rewards(
    rule: str,
    answers: Sequence[Sequence[str | None] | None],
    own_labels: Sequence[str | None],
    kind: str,
    gold: str | None = None,
    tau: float = 0.0,
):
    """``compute_rewards`` when some members are remote: a remote member (answers None) enters by
    its own label alone, which is all the peer rules read of it. Gold reaches only ``ground_truth``."""
    stand_in = [list(a) if a is not None else [label] for a, label in zip(answers, own_labels, strict=True)]
    return compute_rewards(rule, stand_in, kind, gold if rule == "ground_truth" else None, tau)


class CohortLearner:
    """Trains the members listed in ``local`` (default: all) on the cohort's rewards."""

    config_class: ClassVar[type[CohortConfig]] = CohortConfig

    def __init__(
        self,
        cfg: CohortConfig,
        *,
        local: Sequence[int] | None = None,
        link: CohortLink | None = None,
        out_dir: str | Path | None = None,
    ) -> None:
        self.cfg = cfg
        self.out = Path(out_dir or cfg.output_dir)
        self.local = list(range(len(cfg.members))) if local is None else list(local)
        if (link is None) != (len(self.local) == len(cfg.members)):
            raise ValueError("run every member locally without a CohortLink, or exactly one member with one")
        if link is not None and len(self.local) != 1:
            raise ValueError("a CohortLink process runs exactly one member")
        self.link = link
        self.problems = load_problems(cfg.data, cfg.seed)
        if not self.problems:
            raise ValueError(f"dataset {cfg.data.dataset!r} gave no problems")
        self.step_count = 0
        self.members = [self._build_member(i) for i in self.local]
        suffix = "" if len(self.local) == len(cfg.members) else f"-{cfg.members[self.local[0]].name}"
        self.ckpt_root = self.out / f"checkpoints{suffix}"
        self.logger: MetricsLogger | None = None
        self._log_name = f"metrics{suffix}"

    # -- setup -------------------------------------------------------------------------------
    def _build_member(self, index: int) -> Member:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        mcfg = self.cfg.members[index]
        path = self._tiny_model(index) if mcfg.tiny_family else mcfg.model
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, mcfg.dtype)).to(mcfg.device)
        tokenizer = AutoTokenizer.from_pretrained(path)
        policy = self.cfg.policy
        if mcfg.learning_rate is not None:
            policy = dataclasses.replace(policy, learning_rate=mcfg.learning_rate)
        updater = PolicyUpdater(model, policy, num_training_steps=self.cfg.max_steps)
        generator = _make_generator(mcfg, path, updater.model, tokenizer)
        return Member(index, mcfg, updater.model, tokenizer, generator, updater)

    def _tiny_model(self, index: int) -> str:
        """Build (or reuse) member ``index``'s tiny model, warmed up to state answers; its folder."""
        import json

        from transformers import AutoModelForCausalLM, AutoTokenizer

        from councilzoo.testing import build_tiny_model

        mcfg = self.cfg.members[index]
        root = Path(self.cfg.tiny_models_dir) if self.cfg.tiny_models_dir else self.out / "models"
        base = build_tiny_model(
            root / f"{mcfg.name}-base", family=mcfg.tiny_family, seed=self.cfg.seed + index
        )
        if not mcfg.tiny_warmup_steps:
            return str(base)
        spec = {
            "steps": mcfg.tiny_warmup_steps,
            "seed": self.cfg.seed + index,
            "view": mcfg.view,
            "data": config_to_dict(self.cfg.data),
            "family": mcfg.tiny_family,
        }
        warm, marker = root / mcfg.name, root / mcfg.name / "councilzoo_warmup.json"
        if not marker.is_file() or json.loads(marker.read_text()) != spec:
            model, tokenizer = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
            prompts = [self._prompt(p, mcfg) for p in self.problems[:64]]
            teach_answer_format(model, tokenizer, prompts, mcfg.tiny_warmup_steps, self.cfg.seed + index)
            model.save_pretrained(warm)
            tokenizer.save_pretrained(warm)
            marker.write_text(json.dumps(spec))  # written last: marks a complete build
        return str(warm)

    # -- data --------------------------------------------------------------------------------
    def batch(self, step: int) -> list[Problem]:
        """Items of ``step``: consecutive slices of a per-epoch seeded permutation (resumable)."""
        n, k = len(self.problems), self.cfg.prompts_per_step
        out = []
        for pos in range(step * k, (step + 1) * k):
            epoch, offset = divmod(pos, n)
            order = np.random.default_rng([self.cfg.seed, epoch]).permutation(n)
            out.append(self.problems[order[offset]])
        return out

    # -- one step ----------------------------------------------------------------------------
    @staticmethod
    def _prompt(problem: Problem, mcfg: MemberConfig) -> list[dict[str, str]]:
        view = paraphrase(problem, mcfg.view)
        return render_messages(TurnContext(0, mcfg.name, "member", 0, view, (), (Mode.ANSWER,), NO_FEATURES))

    def sample(self, member: Member, problems: Sequence[Problem], step: int) -> list[list[Completion]]:
        prompts = [self._prompt(p, member.cfg) for p in problems]
        seed = int(np.random.SeedSequence([self.cfg.seed, step, member.index]).generate_state(1)[0])
        sampling = Sampling(
            max_new_tokens=self.cfg.max_new_tokens,
            temperature=self.cfg.policy.temperature,
            top_p=self.cfg.top_p,
            seed=seed,
        )
        return member.generator.generate(prompts, n=self.cfg.num_generations, sampling=sampling)

    def rewards(
        self,
        step: int,
        problems: Sequence[Problem],
        answers: dict[int, list[list[str | None]]],
        batches: dict[int, RolloutBatch],
    ) -> tuple[dict[int, torch.Tensor], dict[int, list[str | None]], list[list[str | None]]]:
        """Per local member: rewards (B*G,) and the label each item was scored against; plus every
        member's own labels per item (for agreement)."""
        n = len(self.cfg.members)
        own = {
            m: [own_label(a, p.kind, self.cfg.tau) for a, p in zip(answers[m], problems, strict=True)]
            for m in answers
        }
        if self.link is not None:
            keys = _item_keys(problems)
            (me,) = own
            self.link.publish(step, dict(zip(keys, own[me], strict=True)))
            exchanged = self.link.collect(step, keys)
            all_own = [[exchanged[key][j] for key in keys] for j in range(n)]
        else:
            all_own = [own.get(j, [None] * len(problems)) for j in range(n)]
        rewards = {m: [] for m in answers}
        labels = {m: [] for m in answers}
        for i, p in enumerate(problems):
            result = cohort_rewards(
                self.cfg.reward_rule,
                [answers[j][i] if j in answers else None for j in range(n)],
                [all_own[j][i] for j in range(n)],
                p.kind,
                p.answer,
                self.cfg.tau,
            )
            for m in answers:
                rewards[m].extend(result.rewards[m])
                labels[m].append(result.labels[m])
        return {m: torch.tensor(r) for m, r in rewards.items()}, labels, all_own

    def step(self) -> dict[str, float]:
        """Sample, label, and update every local member once; returns this step's metrics."""
        start = time.perf_counter()
        step = self.step_count
        problems = self.batch(step)
        kinds, golds = [p.kind for p in problems], [p.answer for p in problems]  # golds: diagnostics only
        groups, answers, batches = {}, {}, {}
        for member in self.members:
            groups[member.index] = self.sample(member, problems, step)
            answers[member.index] = [
                [extract_answer(c.text, p.kind) for c in g]
                for g, p in zip(groups[member.index], problems, strict=True)
            ]
            pad = member.tokenizer.pad_token_id if member.tokenizer.pad_token_id is not None else 0
            batches[member.index] = RolloutBatch.from_completions(groups[member.index], pad)
        rewards, labels, all_own = self.rewards(step, problems, answers, batches)
        out: dict[str, float] = {}
        for member in self.members:
            m, name = member.index, member.cfg.name
            stats = member.updater.step(batches[m], rewards[m])
            sync = getattr(member.generator, "sync_weights", None)
            if sync is not None:  # vLLM: push the new weights to the colocated engine
                sync(member.model)
            out.update({f"{name}/{k}": v for k, v in stats.items()})
            out[f"{name}/reward"] = float(rewards[m].mean())
            out[f"{name}/label_accuracy"] = M.label_accuracy(labels[m], golds, kinds)
            out[f"{name}/unlabeled"] = sum(lab is None for lab in labels[m]) / len(problems)
            out[f"{name}/oracle_reward"] = M.oracle_reward(answers[m], golds, kinds)
            out[f"{name}/completion_tokens"] = float(batches[m].completion_mask.sum(-1).float().mean())
            out.update({f"{name}/{k}": v for k, v in M.group_diversity(answers[m], kinds).items()})
        for key in ("reward", "label_accuracy", "oracle_reward", "collapse", "answer_entropy"):
            values = np.array([out[f"{m.cfg.name}/{key}"] for m in self.members], dtype=float)
            out[key] = float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
        if len(self.cfg.members) > 1:
            out["agreement"] = M.pairwise_agreement(all_own, kinds)
        out["step_time_s"] = time.perf_counter() - start
        self.step_count += 1
        return out

    # -- checkpoints -------------------------------------------------------------------------
    def save(self) -> Path:
        return save_checkpoint(
            self.ckpt_root,
            self.step_count,
            models={m.cfg.name: m.model for m in self.members},
            states={
                m.cfg.name: {"optimizer": m.updater.optimizer, "scheduler": m.updater.scheduler}
                for m in self.members
            },
            state={
                "data_position": self.step_count * self.cfg.prompts_per_step,
                "members": [m.cfg.name for m in self.members],
            },
            keep_last=self.cfg.keep_last,
        )

    def load(self, path: str | Path) -> None:
        ckpt = load_checkpoint(
            path,
            models={m.cfg.name: m.model for m in self.members},
            states={
                m.cfg.name: {"optimizer": m.updater.optimizer, "scheduler": m.updater.scheduler}
                for m in self.members
            },
        )
        self.step_count = ckpt.step
        for m in self.members:
            sync = getattr(m.generator, "sync_weights", None)
            if sync is not None:
                sync(m.model)

    # -- loop --------------------------------------------------------------------------------
    def train(self, max_steps: int | None = None, resume: bool = False) -> list[dict[str, float]]:
        """Run until ``max_steps`` (default: config), checkpointing; returns the logged rows."""
        cfg, total = self.cfg, max_steps or self.cfg.max_steps
        if resume and (path := latest_checkpoint(self.ckpt_root)) is not None:
            self.load(path)
        write_run_files(self.out, cfg, cfg.seed, learner=type(self).__name__, resumed_at=self.step_count)
        rows = []
        with MetricsLogger(
            self.out,
            cfg.report_to,
            project=cfg.project,
            config=config_to_dict(cfg),
            resume=resume,
            file_name=f"{self._log_name}.jsonl",
        ) as logger:
            while self.step_count < total:
                row = self.step()
                logger.log(self.step_count, row)
                rows.append(row)
                if cfg.save_steps and self.step_count % cfg.save_steps == 0:
                    self.save()
        self.save()
        for m in self.members:
            m.model.save_pretrained(self.out / "final" / m.cfg.name)
            m.tokenizer.save_pretrained(self.out / "final" / m.cfg.name)
        return rows


class CoRL(CohortLearner):
    """Co-RL (see the module docstring): ``CoRL(load_config(path, CoRLConfig)).train()``."""

    config_class = CoRLConfig


def teach_answer_format(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[list[dict[str, str]]],
    steps: int,
    seed: int,
    choices: str = "ABCD",
    lr: float = 3e-3,
    batch_size: int = 16,
) -> None:
    """A few SFT steps on ``prompt -> "\\boxed{X}"`` with X uniform over ``choices``: a random tiny
    model then states (random) answers, so labels, votes and rewards are non-trivial on CPU."""
    rng = np.random.default_rng(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        rows, masks = [], []
        for i in rng.integers(0, len(prompts), size=batch_size):
            prompt = tokenizer.apply_chat_template(prompts[i], add_generation_prompt=True, tokenize=False)
            answer = f"The answer is \\boxed{{{choices[rng.integers(len(choices))]}}}." + tokenizer.eos_token
            p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            a_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
            rows.append(p_ids + a_ids)
            masks.append([0] * len(p_ids) + [1] * len(a_ids))
        width = max(map(len, rows))
        ids = torch.tensor(
            [r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows], device=model.device
        )
        labels = torch.tensor([m + [0] * (width - len(m)) for m in masks], device=model.device)
        attention = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=model.device)
        loss = model(input_ids=ids, attention_mask=attention, labels=ids.masked_fill(labels == 0, -100)).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def _item_keys(problems: Sequence[Problem]) -> list[str]:
    """Exchange keys: the problem id, with ``~k`` on the k-th repeat within one step."""
    seen: dict[str, int] = {}
    keys = []
    for p in problems:
        k = seen.get(p.id, 0)
        seen[p.id] = k + 1
        keys.append(p.id if k == 0 else f"{p.id}~{k}")
    return keys


def _make_generator(mcfg: MemberConfig, path: str, model: Any, tokenizer: Any) -> Any:
    """The member's sampler; it shares the training model (transformers) or syncs from it (vLLM)."""
    if mcfg.generator == "vllm":
        from councilzoo.agents.generators.vllm_backend import VLLMGenerator

        return VLLMGenerator(path, **mcfg.vllm)
    from councilzoo.agents.generators.transformers_backend import TransformersGenerator

    # peft injects the adapters into the base model's modules, so the base model samples with them
    base = model.get_base_model() if hasattr(model, "peft_config") else model
    return TransformersGenerator(base, tokenizer=tokenizer)
