"""Co-RL's configuration: members, data, held-out evaluation, and what a member answers.

``CoRLConfig`` is what ``councilzoo train`` reads for Co-RL and its baselines; every member
world loads the same file and checks the same fingerprint. ``learners.data.load_items`` is the one
source of a member's problems (training, tiny-model warm-up, evaluation);
``agents.prompts.member_prompt`` of its prompts.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

from councilzoo.agents.prompts import check_prompt_style
from councilzoo.config import cache_home, config_to_dict, gather, spec_dir
from councilzoo.learners import engine
from councilzoo.learners.corl.link import DistributedConfig
from councilzoo.learners.data import DataConfig
from councilzoo.learners.logging import check_report_to
from councilzoo.learners.placement import VLLM_GROUP_PORT
from councilzoo.learners.recipe_checks import check_sleep_mode
from councilzoo.learners.shared_base import check_group
from councilzoo.real_models import is_real_model_name
from councilzoo.tiny_members import member_spec

__all__ = ["MemberConfig", "EvalConfig", "CoRLConfig", "VLLM_GROUP_PORT"]


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
    prompt_style: str | None = field(
        default=None,
        metadata={"help": "This member's prompt texts (agents.prompts.PROMPT_STYLES), over the cohort's "
                  "prompt_style: 'few_shot' for a base model. A model without a chat template is "
                  "prompted with completion text either way."},
    )
    stop: list[str] = field(
        default_factory=list,
        metadata={"help": "Strings that end this member's completions (a base model prompted with "
                  "completion text goes on to write the next question: ['\\nQuestion:']); needs "
                  "seeded_sampling (TRL's own generation takes none)."},
    )
    trainer: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "GRPOConfig fields for this member (over the cohort's)."}
    )
    peft: dict[str, Any] | None = field(
        default=None, metadata={"help": "LoRA: peft.LoraConfig arguments (r, lora_alpha, target_modules...)."}
    )
    num_processes: int = field(
        default=1, metadata={"help": "Processes of this member's world on each of its nodes (data parallel)."}
    )
    nodes: int | None = field(
        default=None,
        metadata={"help": "Machines this member's world spans, num_processes on each (torchrun's c10d "
                  "rendezvous; the placement plan picks the hosts); default: its accelerate config's "
                  "num_machines, else 1."},
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
    shared_base: str | None = field(
        default=None,
        metadata={
            "help": "A base group's name: members naming the same group share one copy of their (same) "
            "model in one world, each training its own LoRA adapter (its 'peft'); a tiny_family group's "
            "base is its first member's model."
        },
    )

    def __post_init__(self) -> None:
        """Every mistake of the member at once, one line each (the config's loader adds the file,
        the line and ``members[i]``)."""
        problems = []
        if not self.name or "/" in self.name:
            problems.append(f"member name must be non-empty and contain no '/', got {self.name!r}")
        if bool(self.model) == bool(self.tiny_family):
            problems.append(f"member {self.name!r}: give exactly one of 'model' and 'tiny_family'")
        if self.prompt_style is not None:
            gather(problems, check_prompt_style, self.prompt_style)
        nodes = 1 if self.nodes is None else self.nodes
        if self.num_processes < 1 or nodes < 1 or self.view < 0 or self.tiny_warmup_steps < 0:
            problems.append(
                f"member {self.name!r}: num_processes >= 1, nodes >= 1, view >= 0, tiny_warmup_steps >= 0"
            )
        local = self.model.startswith(("/", ".", "~")) or self.model.count("/") != 1
        local = local and not is_real_model_name(self.model)  # smollm2-135m-instruct: converted on use
        if self.model and local and not Path(self.model).expanduser().is_dir():
            problems.append(f"member {self.name!r}: model path {self.model!r} does not exist")
        gather(problems, engine.check_trainer_overrides, self.trainer, "trainer")
        placed = self.num_processes != 1 or self.nodes or self.accelerate_config or self.devices
        if self.shared_base and placed:
            problems.append(f"member {self.name!r}: a shared_base member runs in its group's one-process "
                            "world; leave num_processes, nodes, accelerate_config and devices unset")
        if self.accelerate_config and not Path(self.accelerate_config).is_file():
            problems.append(
                f"member {self.name!r}: accelerate_config {self.accelerate_config!r} does not exist"
            )
        if problems:
            raise ValueError("\n".join(problems))

    def accelerate_settings(self) -> dict[str, Any]:
        """The member's accelerate config file as a mapping (empty without one)."""
        if not self.accelerate_config:
            return {}
        import yaml

        return yaml.safe_load(Path(self.accelerate_config).read_text()) or {}

    def machines(self) -> int:
        """Machines the member's world spans: ``nodes``, else its accelerate config's ``num_machines``
        (the plan's launch command passes it to accelerate, with the address and each node's rank)."""
        return self.nodes or int(self.accelerate_settings().get("num_machines", 1))

    def world_size(self) -> int:
        """Processes of the member's world: ``num_processes`` on each of its machines."""
        return self.num_processes * self.machines()


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
class CoRLConfig:
    """A Co-RL run (``councilzoo train corl``; the baselines narrow its rules): N >= 2 members
    rewarded by peer labels (``ring``, ``peer_majority``, ``peer_share``); the run-level names are
    TRL's (output_dir, max_steps, save_steps, ...)."""

    RULES: ClassVar[tuple[str, ...]] = ("ring", "peer_majority", "peer_share")
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
        metadata={
            "help": "Where tiny_family models are cached, each in a folder named by the hash of its "
            "settings; default: the cache folder's cohort_members/ ($COUNCILZOO_CACHE, else "
            "$XDG_CACHE_HOME/councilzoo, else ~/.cache/councilzoo)."
        },
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
    prompt_style: str = field(
        default="default",
        metadata={
            "help": "The members' prompt texts (agents.prompts.PROMPT_STYLES): 'default' asks to think "
            "step by step and box the answer; 'concise' asks for the number only, for small models "
            "such as SmolLM2-135M-Instruct that ramble past a short token budget."
        },
    )
    seeded_sampling: bool = field(
        default=False,
        metadata={
            "help": "Seed each item's G samples by (seed, step, item): the same samples and update for any "
            "number of processes (transformers: one generate call per item; vLLM colocated: one seed per "
            "item; vLLM server: one request per item with its seed; text models)."
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
        check_prompt_style(self.prompt_style)
        owned = [name for name, on in (("held-out evaluation", self.eval.eval_steps),
                                       ("seeded_sampling", self.seeded_sampling)) if on]
        for i, member in enumerate(self.members):
            settings, where = {**self.trainer, **member.trainer}, f"members[{i}] ({member.name})"
            if self.seeded_sampling:
                _check_seeded_sampling(settings, where)
            elif member.stop:
                raise ValueError(f"{where}: stop strings need seeded_sampling: true (TRL's own generation "
                                 "takes none)")
            check_sleep_mode(settings, owned, where)
        problems = []
        for group, indices in self.base_groups().items():
            members = [self.members[i] for i in indices]
            problems += check_group(
                group,
                {m.name: m.model or f"tiny_family {m.tiny_family}" for m in members},
                {m.name: m.peft for m in members},
                {m.name: {**self.trainer, **m.trainer} for m in members},
                self.report_to,
            )
        if problems:
            raise ValueError("\n".join(problems))

    def base_groups(self) -> dict[str, list[int]]:
        """Member indices by ``shared_base`` group (members without one are in none)."""
        groups: dict[str, list[int]] = {}
        for i, member in enumerate(self.members):
            if member.shared_base:
                groups.setdefault(member.shared_base, []).append(i)
        return groups

    def member_style(self, index: int) -> str:
        """Member ``index``'s prompt style: its own, else the cohort's."""
        return self.members[index].prompt_style or self.prompt_style

    def member_dir(self, index: int) -> Path:
        return Path(self.output_dir) / "members" / self.members[index].name

    @property
    def views(self) -> dict[str, int]:
        """Each member's paraphrase view, by member name (what ``load_items`` checks the items for)."""
        return {m.name: m.view for m in self.members}

    def member_args(self, index: int, world_size: int | None = None) -> Any:
        """Member ``index``'s ``GRPOConfig`` for ``world_size`` processes (default: this process's
        world) on this machine (``member_grpo_settings``)."""
        settings = self.member_grpo_settings(index, world_size)
        return engine.grpo_config(settings, settings["run_name"])

    def member_grpo_settings(
        self, index: int, world_size: int | None = None, cpu: bool | None = None,
        vllm_group_port: int | None = None,
    ) -> dict[str, Any]:
        """Member ``index``'s ``GRPOConfig`` arguments (cohort trainer settings, then the member's own),
        its batch settings checked for ``world_size`` processes; ``vllm_group_port`` defaults to
        ``VLLM_GROUP_PORT + index`` (what the placement plan decides for several machines)."""
        member = self.members[index]
        run = replace(engine.RunSettings.of(self), output_dir=self.member_dir(index))
        port = VLLM_GROUP_PORT + index if vllm_group_port is None else vllm_group_port
        return run.grpo_settings(
            engine.Round(self.prompts_per_step, self.num_generations, self.max_completion_length),
            run_name=f"{Path(self.output_dir).name}-{member.name}",
            overrides={"vllm_group_port": port, **self.trainer, **member.trainer},
            world_size=world_size,
            where=f"members.{index} ({member.name})",
            cpu=cpu,
        )

    def tiny_model_dir(self, index: int) -> Path:
        """Where member ``index``'s tiny model is cached (``tiny_family``; ``councilzoo.tiny_models``):
        a folder named by the hash of the settings that determine its weights."""
        root = Path(self.tiny_models_dir) if self.tiny_models_dir else cache_home() / "cohort_members"
        return spec_dir(root, member_spec(self, index))

    def fingerprint(self) -> str:
        """Hash of what the members learn from: members of one cohort must agree on it to join.

        Where and how a member runs (``_PLACEMENT``: devices, hosts, ports, process counts, server
        URLs, output folders) is left out, so that each node of a multi-node run may set its own."""
        resolved = config_to_dict(self)
        for key in _PLACEMENT["run"]:
            resolved.pop(key, None)
        for scope in (resolved, *resolved["members"]):
            scope["trainer"] = {k: v for k, v in scope["trainer"].items() if k not in _PLACEMENT["trainer"]}
        for member in resolved["members"]:
            for key in _PLACEMENT["member"]:
                member.pop(key, None)
        return hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()[:16]


# Settings that place a run (machines, ports, folders, trackers) and change no update.
_PLACEMENT = {
    "run": ("output_dir", "tiny_models_dir", "report_to", "project", "distributed", "warm_start"),
    "member": ("num_processes", "nodes", "devices", "accelerate_config", "shared_base"),
    "trainer": (
        "vllm_server_base_url", "vllm_server_host", "vllm_server_port", "vllm_server_timeout",
        "vllm_group_port", "vllm_gpu_memory_utilization", "logging_dir", "dataloader_num_workers",
    ),
}


# GRPOConfig sampling settings that SeededSampling does not apply, with their defaults.
_UNSEEDED_SETTINGS = {"top_k": 0, "min_p": None, "repetition_penalty": 1.0, "generation_kwargs": None}


def _check_seeded_sampling(settings: dict[str, Any], where: str) -> None:
    """``seeded_sampling`` samples with temperature, top_p and max_completion_length only (with
    transformers, a colocated vLLM engine or a vLLM server alike)."""
    changed = sorted(k for k, default in _UNSEEDED_SETTINGS.items() if settings.get(k, default) != default)
    if changed:
        raise ValueError(f"{where}: seeded_sampling does not apply trainer settings {changed}")
