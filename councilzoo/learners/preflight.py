"""``councilzoo train NAME CONFIG --dry-run``: what a run would do, and what is wrong with it,
before it spends GPU-hours.

It runs on any machine (a laptop without a GPU included): it reads the config and, where they are
local (a model folder or the Hugging Face cache), the models' ``config.json``; it downloads
nothing and loads no weights. For each trained model it prints the world size, sharding, effective
batch, round and rounds per epoch, the memory a GPU needs, vLLM's share, and the held-out set, then
every finding of ``CHECKS``. A finding is a warning or an error; an error (a setting
docs/learners.md calls wrong) makes the command exit 2, each error also one line on stderr.

Memory is an estimate from the parameter count (docs/learners.md, "GPU memory"): the training
state of ``recipe_checks.training_gib`` for the member's sharding, plus the share of the GPU a
colocated vLLM engine takes (``vllm_gpu_memory_utilization``); activations come on top.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from councilzoo.config import ConfigError
from councilzoo.learners.recipe_checks import GIB, STATE_BYTES, check_views, training_gib, vllm_gib

__all__ = ["model_facts", "Plan", "CHECKS", "describe", "preflight", "dry_run"]

_FROZEN_BYTES_PER_PARAM = 4  # a LoRA run's base weights (fp32)
_DEFAULT_GPU_GIB = 80.0


@dataclass(frozen=True)
class ModelFacts:
    """What sizes a run: parameters and, for vLLM's KV cache, the attention shape and context."""

    params: float
    layers: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    context: int | None = None
    source: str = "config.json"

    def kv_bytes_per_token(self) -> int | None:
        """Keys and values of every layer in bf16."""
        if None in (self.layers, self.kv_heads, self.head_dim):
            return None
        return 2 * self.layers * self.kv_heads * self.head_dim * 2


# The shipped GPU recipes' models, from their hub config.json (text model of a VLM), so that a
# machine without the hub still sizes them. Others: a local config.json, else the name's size.
_KNOWN_MODELS = {
    "Qwen/Qwen2.5-1.5B-Instruct": ModelFacts(1.54e9, 28, 2, 128, 32768, source="hub config.json"),
    "meta-llama/Llama-3.2-1B-Instruct": ModelFacts(1.24e9, 16, 8, 64, 131072, source="hub config.json"),
    "Qwen/Qwen2.5-VL-3B-Instruct": ModelFacts(3.75e9, 36, 2, 128, 128000, source="hub config.json"),
    "OpenGVLab/InternVL3_5-2B-HF": ModelFacts(2.35e9, 28, 8, 128, 40960, source="hub config.json"),
}

# Items of the named datasets' splits (their hub cards), for rounds per epoch without a download.
_SPLIT_SIZES = {("gsm8k", "train"): 7473, ("gsm8k", "test"): 1319, ("math500", "test"): 500,
               ("gpqa_diamond", "test"): 198, ("mathvista", "testmini"): 1000}  # fmt: skip


def model_facts(name: str) -> ModelFacts | None:
    """A model's facts from its local ``config.json`` (a folder, or the hub cache's copy), else the
    shipped recipes' table, else its parameter count from the name (``...-1.5B-...``); None if none."""
    config = _local_config(name)
    if config is not None:
        return _facts_from_config(config)
    if name in _KNOWN_MODELS:
        return _KNOWN_MODELS[name]
    size = re.search(r"(\d+(?:\.\d+)?)\s*([BM])\b", name.replace("_", "-"), re.IGNORECASE)
    if size is None:
        return None
    scale = 1e9 if size.group(2).upper() == "B" else 1e6
    return ModelFacts(float(size.group(1)) * scale, source=f"the name's {size.group(0)}")


def _local_config(name: str) -> Path | None:
    folder = Path(name).expanduser()
    if (folder / "config.json").is_file():
        return folder
    if name.count("/") == 1 and not folder.exists():
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name, "config.json")
        if isinstance(cached, str):
            return Path(cached).parent
    return None


def _facts_from_config(folder: Path) -> ModelFacts:
    """Parameters counted on the meta device (no memory) and the text model's attention shape."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    config = AutoConfig.from_pretrained(folder)
    text = config.get_text_config()
    with torch.device("meta"):
        try:
            model = AutoModelForCausalLM.from_config(config)
        except ValueError:
            model = AutoModelForImageTextToText.from_config(config)
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return ModelFacts(
        float(sum(p.numel() for p in model.parameters())),
        text.num_hidden_layers,
        getattr(text, "num_key_value_heads", None) or heads,
        head_dim,
        getattr(text, "max_position_embeddings", None),
        source=f"{folder}/config.json",
    )


@dataclass
class Plan:
    """One trained model of a run, as the preflight sees it."""

    where: str
    name: str
    model: str
    facts: ModelFacts | None
    args: Any  # the GRPOConfig the run would build
    world: int
    machines: int
    sharding: str
    data: tuple[str, str, str | None, int | None]  # dataset, split, path, limit
    items: int | None
    items_per_round: int  # training items a round (TRACER: problems a step)
    round_of: str  # what the round's prompts are: items, or TRACER's speaking turns
    held_out: str | None
    label_free: bool
    view: int = 0
    lora: bool = False
    base_with: str | None = None  # a shared_base adapter's group member whose plan counts the base
    paraphrases: str | None = None  # data.paraphrases
    local_items: list | None = None  # the training items where they are on this machine (synthetic, a file)
    explicit: dict[str, Any] = field(default_factory=dict)  # the trainer settings the config sets
    gpu_gib: float = _DEFAULT_GPU_GIB

    @property
    def accumulation(self) -> int:
        return self.args.gradient_accumulation_steps

    def effective_batch(self) -> int:
        return self.args.per_device_train_batch_size * self.world * self.accumulation

    def optimizer_steps_a_round(self) -> float:
        """Micro-steps of a round over this world (x ``num_iterations``) / accumulation (TRL's own
        ``steps_per_generation`` counts this process's world, not the planned one)."""
        a = self.args
        micro_steps = a.generation_batch_size // (a.per_device_train_batch_size * self.world)
        return micro_steps * a.num_iterations / self.accumulation

    def vllm_colocated(self) -> bool:
        return bool(self.args.use_vllm) and self.args.vllm_mode == "colocate"

    def training_gib(self) -> float | None:
        """Weights, gradients and optimizer states a GPU holds (``recipe_checks.training_gib``; FSDP's
        full sharding as ZeRO-3's); LoRA: the frozen fp32 weights alone (adapters are small), counted
        once for a shared base (with its group's first member)."""
        if self.facts is None:
            return None
        if self.base_with:
            return 0.0
        if self.lora:
            split = self.layout() == "zero3"
            return self.facts.params * _FROZEN_BYTES_PER_PARAM / (self.world if split else 1) / GIB
        return training_gib(self.facts.params, self.world, self.layout())

    def layout(self) -> str:
        """The sharding as ``recipe_checks.STATE_BYTES`` names it."""
        return {"ZeRO-3": "zero3", "FSDP": "zero3", "ZeRO-2": "zero2"}.get(self.sharding, "ddp")

    def vllm_gib(self) -> float:
        return self.args.vllm_gpu_memory_utilization * self.gpu_gib if self.vllm_colocated() else 0.0

    def vllm_context(self) -> int | None:
        return self.args.vllm_max_model_length or (self.facts.context if self.facts else None)

    def vllm_sequences(self) -> int | None:
        """Sequences of the full context that the colocated engine's KV cache holds at once: its
        share less its bf16 weights (``recipe_checks.vllm_gib`` of no sequence)."""
        kv = self.facts.kv_bytes_per_token() if self.facts else None
        context = self.vllm_context()
        if not self.vllm_colocated() or kv is None or context is None:
            return None
        free = (self.vllm_gib() - vllm_gib(self.facts.params, kv, 0, context)) * GIB
        return max(0, int(free // (kv * context)))


def _sharding_of(settings: dict[str, Any], world: int) -> str:
    """DDP, ZeRO-2, ZeRO-3 or FSDP from an accelerate config's settings (one process: none)."""
    backend = settings.get("distributed_type")
    if backend == "DEEPSPEED":
        return f"ZeRO-{settings.get('deepspeed_config', {}).get('zero_stage', 0)}"
    if backend == "FSDP":
        return "FSDP"
    return "DDP" if world > 1 else "none"


def _count_items(dataset: str, split: str, path: str | None, limit: int | None, size: int) -> int | None:
    """Items of a training or held-out set without downloading it (None where unknown offline)."""
    if dataset.startswith("synthetic:"):
        return limit or size  # load_problems makes this many
    if path is not None and Path(path).is_file():
        text = Path(path).read_text()
        n = (
            len(json.loads(text))
            if path.endswith(".json")
            else sum(1 for line in text.splitlines() if line.strip())
        )
    else:
        n = _SPLIT_SIZES.get((dataset, split))
    return n if n is None or limit is None else min(n, limit)


# ---- the checks: each takes a plan and returns its (level, text) findings ---------------------

Finding = tuple[str, str]


def check_views_have_paraphrases(plan: Plan) -> list[Finding]:
    """A view > 0 reads the item's paraphrases; without them the member trains on the original
    wording. Items on this machine are checked as the run will check them (``check_views``)."""
    if plan.view == 0:
        return []
    if plan.paraphrases and not Path(plan.paraphrases).is_file():
        return [("warning", f"view {plan.view} reads data.paraphrases {plan.paraphrases}, which is not on "
                            "this machine: write it (`councilzoo paraphrase`) before the run")]  # fmt: skip
    if plan.local_items is not None:
        try:
            check_views(plan.local_items, {plan.name: plan.view}, "data")
        except ConfigError as err:
            return [("error", str(err))]
        return []
    if not plan.paraphrases:
        return [("error", f"view {plan.view} asks for rephrased items, but {plan.data[0]} items carry no "
                          "paraphrases, so the member would see the original wording (a no-op); set "
                          "data.paraphrases (`councilzoo paraphrase`) or use view 0")]  # fmt: skip
    return []  # a named dataset's items meet the paraphrase file when the run loads them


def check_fp32_master_weights(plan: Plan) -> list[Finding]:
    dtype = str((plan.args.model_init_kwargs or {}).get("dtype") or "")
    if not plan.lora and dtype.replace("torch.", "") in ("bfloat16", "float16", "auto"):
        return [("error", f"trainer.model_init_kwargs.dtype {dtype} trains the checkpoint's half-precision "
                          "weights (pure bf16 for most hub models): most "
                          "AdamW updates at a small learning rate round away; load float32 and set "
                          "bf16: true (autocast)")]  # fmt: skip
    return []


def check_held_out_evaluation(plan: Plan) -> list[Finding]:
    if plan.held_out is None:
        why = "the training reward measures agreement, not accuracy, so " if plan.label_free else ""
        return [("warning", f"no held-out evaluation: {why}the run would leave no evidence of learning; "
                            "add an eval block (e.g. GSM8K test, MATH-500)")]  # fmt: skip
    return []


def check_vllm_context(plan: Plan) -> list[Finding]:
    if plan.args.use_vllm and not plan.args.vllm_max_model_length:
        context = plan.vllm_context()
        full = f"{context:,} tokens" if context else "the model's full context"
        return [
            (
                "warning",
                f"vllm_max_model_length unset: vLLM sizes itself for {full}; set it to the "
                f"longest prompt + max_completion_length ({plan.args.max_completion_length})",
            )
        ]
    return []


def check_memory_fits(plan: Plan) -> list[Finding]:
    training = plan.training_gib()
    if training is None:
        return []
    total = training + plan.vllm_gib()
    if total > plan.gpu_gib:
        return [("error", f"needs ~{total:.0f} GiB a GPU before activations (training {training:.1f} + vLLM "
                          f"{plan.vllm_gib():.1f}) on {plan.gpu_gib:.0f} GiB GPUs; shard (ZeRO-3/FSDP), add "
                          "processes or lower vllm_gpu_memory_utilization")]  # fmt: skip
    return []


def check_vllm_holds_a_sequence(plan: Plan) -> list[Finding]:
    sequences = plan.vllm_sequences()
    if sequences == 0:
        return [("error", f"vLLM's {plan.vllm_gib():.1f} GiB cannot hold the weights and one sequence of "
                          f"{plan.vllm_context():,} tokens; raise vllm_gpu_memory_utilization or lower "
                          "vllm_max_model_length")]  # fmt: skip
    return []


def check_sharding_fits_size(plan: Plan) -> list[Finding]:
    if plan.facts is None or plan.lora:
        return []
    billions = plan.facts.params / 1e9
    if plan.sharding in ("ZeRO-3", "FSDP") and billions <= 3:
        return [
            (
                "warning",
                f"{plan.sharding} for a {billions:.1f}B model: every forward (generation's weight "
                "gathers included) all-gathers the parameters; ZeRO-2 or DDP fits and is faster",
            )
        ]
    if plan.sharding in ("none", "DDP", "ZeRO-2") and billions >= 7:
        return [("warning", f"{plan.sharding} for a {billions:.1f}B model: use ZeRO-3 (or FSDP) from 7B")]
    return []


def check_round_fills_vllm(plan: Plan) -> list[Finding]:
    """A round far smaller than what vLLM's KV cache holds at once leaves the GPUs idle through
    generation. A sequence's length: ``vllm_max_model_length`` where set (the longest prompt and
    completion), else twice ``max_completion_length`` (a prompt as long as the completion)."""
    sequences, context = plan.vllm_sequences(), plan.vllm_context()
    if sequences is None or context is None:
        return []
    per_process = plan.args.generation_batch_size // plan.world
    length = plan.args.vllm_max_model_length or 2 * plan.args.max_completion_length
    room = sequences * context // length
    if per_process * 4 < room:
        return [("warning", f"a round is {per_process} completions a process, while vLLM holds ~{room:,} "
                            f"sequences of {length} tokens at once: raise prompts_per_step to fill the "
                            "GPUs")]  # fmt: skip
    return []


def check_importance_sampling_mode(plan: Plan) -> list[Finding]:
    a = plan.args
    if (
        a.use_vllm
        and a.vllm_importance_sampling_correction
        and "vllm_importance_sampling_mode" not in plan.explicit
    ):
        mode = a.vllm_importance_sampling_mode
        return [("warning", f"vllm_importance_sampling_mode left at TRL's {mode}: an "
                            f"unnormalised product of per-token ratios over up to {a.max_completion_length} "
                            "tokens masks or down-weights long completions far more than short ones; choose "
                            "the mode")]  # fmt: skip
    return []


def check_generation_backend(plan: Plan) -> list[Finding]:
    if plan.where == "tracer" and not plan.args.use_vllm:
        return [
            (
                "warning",
                "generation.trainer has no use_vllm: episodes and candidates are generated by "
                "transformers, several times slower than vLLM on a GPU",
            )
        ]
    return []


CHECKS: list[Callable[..., list[Finding]]] = [
    check_views_have_paraphrases,
    check_fp32_master_weights,
    check_held_out_evaluation,
    check_vllm_context,
    check_memory_fits,
    check_vllm_holds_a_sequence,
    check_sharding_fits_size,
    check_round_fills_vllm,
    check_importance_sampling_mode,
    check_generation_backend,
]


def _run_checks(plan: Plan) -> list[Finding]:
    return [finding for check in CHECKS for finding in check(plan)]


# ---- the plans of a run ------------------------------------------------------------------------


def _held_out(dataset: str, split: str, path: str | None, limit: int | None, size: int) -> str:
    items = _count_items(dataset, split, path, limit, size)
    return f"{dataset} {split} ({f'{items:,}' if items is not None else 'all'} items)"


def _cohort_plans(cfg: Any, gpu_gib: float, placement: Any = None) -> list[Plan | tuple[str, str]]:
    """A plan per member of a cohort config, or (where, error) where its trainer settings fail;
    the machines each world spans are the ``placement``'s (``learners/placement.py``), where given."""
    from councilzoo.learners.data import load_items

    plans: list[Plan | tuple[str, str]] = []
    d, e = cfg.data, cfg.eval
    items = _count_items(d.dataset, d.split, d.path, d.limit, d.num_problems)
    local_items = None
    here = d.dataset.startswith("synthetic:") or d.path is not None
    if here and (d.paraphrases is None or Path(d.paraphrases).is_file()):
        local_items = load_items(d, cfg.seed)
    held_out = None
    if e.eval_steps:
        held_out = (
            f"{_held_out(e.dataset, e.split, e.path, e.limit, e.num_problems)}, every {e.eval_steps} steps"
        )
    groups = cfg.base_groups()
    for i, member in enumerate(cfg.members):
        where = f"members.{i} ({member.name})"
        first = groups[member.shared_base][0] if member.shared_base else i
        try:
            args = cfg.member_args(i, world_size=member.world_size())
        except ConfigError as err:
            plans.append((where, str(err).removeprefix(f"{where}: ")))
            continue
        model = member.model or f"tiny random {member.tiny_family} (CPU tests)"
        plans.append(Plan(
            where=where, name=member.name, model=model, args=args,
            facts=model_facts(member.model) if member.model else None,
            world=member.world_size(),
            machines=len(placement.world_of(i).nodes) if placement is not None else member.machines(),
            sharding=_sharding_of(member.accelerate_settings(), member.world_size()),
            data=(d.dataset, d.split, d.path, d.limit), items=items, items_per_round=cfg.prompts_per_step,
            round_of="items", held_out=held_out,
            label_free=cfg.reward_rule != "ground_truth", view=member.view, lora=member.peft is not None,
            base_with=f"members.{first} ({cfg.members[first].name})" if first != i else None,
            paraphrases=d.paraphrases, local_items=local_items,
            explicit={**cfg.trainer, **member.trainer}, gpu_gib=gpu_gib,
        ))  # fmt: skip
    return plans


def _tracer_plans(cfg: Any, gpu_gib: float) -> list[Plan | tuple[str, str]]:
    """TRACER's trained model (its utterance trainer), planned on its world's processes; with
    ``agents.train_reviewer`` the reviewer's trainer too, whose base is counted with the
    proposer's when the roles share one (``agents.shared_base``)."""

    from councilzoo.learners.tracer.utterance_layer import utterance_args

    if not cfg.generation.enabled:
        return []
    d = cfg.data
    try:
        args = utterance_args(cfg, cfg.num_processes)
    except ConfigError as err:
        return [("tracer", str(err))]
    every = f"every {cfg.eval_every} TRACER steps" if cfg.eval_every else "at the end"
    sets = [_held_out(name, d.eval_split, None, d.eval_limit, d.num_problems) for name in d.eval]
    held_out = f"{', '.join(sets)}; {every}"
    plan = Plan(
        where="tracer", name="tracer", model=cfg.agents.model, facts=model_facts(cfg.agents.model), args=args,
        world=cfg.num_processes, machines=1, sharding="none",
        data=(d.dataset, d.split, d.path, d.limit),
        items=_count_items(d.dataset, d.split, d.path, d.limit, d.num_problems),
        items_per_round=cfg.problems_per_step, round_of="turns",
        held_out=held_out, label_free=cfg.label_free, lora=cfg.generation.peft is not None,
        explicit=dict(cfg.generation.trainer), gpu_gib=gpu_gib,
    )  # fmt: skip
    if not cfg.agents.train_reviewer:
        return [plan]
    reviewer_cfg = replace(cfg, output_dir=str(Path(cfg.output_dir) / "reviewer"))
    reviewer_args = utterance_args(reviewer_cfg, cfg.num_processes)
    reviewer = replace(plan, where="tracer (reviewer)", name="reviewer", args=reviewer_args,
                       base_with="tracer" if cfg.agents.shared_base else None)  # fmt: skip
    return [plan, reviewer]


def describe(plan: Plan) -> list[str]:
    """The plan's lines: a heading, then one indented line per figure."""
    a, facts, world = plan.args, plan.facts, plan.world
    size = f"{facts.params / 1e9:.2f}B parameters ({facts.source})" if facts else "size unknown offline"
    steps = plan.optimizer_steps_a_round()
    rounds = math.ceil(a.max_steps / steps)
    if plan.items:
        epoch = (
            f"{plan.items / plan.items_per_round:,.1f} rounds ({plan.items:,} items / {plan.items_per_round} "
            f"a round); the run: {rounds:,} rounds = {rounds * plan.items_per_round / plan.items:.2f} epochs"
        )
    else:
        epoch = f"unknown offline ({plan.data[0]} {plan.data[1]}); the run: {rounds:,} rounds"
    lines = [
        f"{plan.where}: {plan.model}, {size}",
        f"  world size       {world} process(es) on {plan.machines} machine(s)",
        f"  sharding         {plan.sharding}{' + LoRA' if plan.lora else ''}",
        f"  effective batch  {plan.effective_batch()} completions an optimizer step "
        f"({a.per_device_train_batch_size} a process x {world} x accumulation {plan.accumulation})",
        f"  round            {a.generation_batch_size} completions "
        f"({a.generation_batch_size // a.num_generations} {plan.round_of} x {a.num_generations}), "
        f"{steps:g} optimizer step(s)",
        f"  epoch            {epoch}",
    ]  # fmt: skip
    training = plan.training_gib()
    if training is not None:
        whole, split = STATE_BYTES[plan.layout()]
        per = " + ".join([f"{whole} whole"] * bool(whole) + [f"{split} / {world}"] * bool(split))
        if plan.lora:
            split = f" / {world}" if plan.layout() == "zero3" else ""
            per = f"frozen fp32 weights, {_FROZEN_BYTES_PER_PARAM}{split}"
        if plan.base_with:
            per = f"the shared base, counted with {plan.base_with}: 0"
        total = training + plan.vllm_gib()
        lines.append(f"  memory a GPU     ~{total:.1f} GiB + activations: training state {training:.1f} GiB "
                     f"({per} bytes a parameter), "
                     f"vLLM {plan.vllm_gib():.1f} GiB")  # fmt: skip
    if a.use_vllm and a.vllm_mode == "server":
        lines.append(f"  vLLM             server {a.vllm_server_base_url or a.vllm_server_host}")
    elif a.use_vllm:
        context, sequences = plan.vllm_context(), plan.vllm_sequences()
        kv = f", KV cache for {sequences:,} sequences of {context:,} tokens" if sequences is not None else ""
        lines.append(
            f"  vLLM             colocated, {a.vllm_gpu_memory_utilization} of a {plan.gpu_gib:.0f} GiB "
            f"GPU = {plan.vllm_gib():.1f} GiB, max_model_len {a.vllm_max_model_length or 'unset'}{kv}"
        )
    else:
        lines.append("  vLLM             off (transformers generates)")
    lines.append(f"  held-out set     {plan.held_out or 'none'}")
    return lines


def preflight(
    learner: str, cfg: Any, gpu_gib: float = _DEFAULT_GPU_GIB, placement: Any = None
) -> tuple[str, list[str]]:
    """The report of a config and its error lines (empty: the run may start); a cohort's
    ``placement`` plan, where given, is printed after it."""
    from councilzoo.learners.corl.config import CoRLConfig
    from councilzoo.learners.tracer.config import TracerConfig

    if isinstance(cfg, CoRLConfig):
        plans = _cohort_plans(cfg, gpu_gib, placement)
    elif isinstance(cfg, TracerConfig):
        plans = _tracer_plans(cfg, gpu_gib)
    else:
        raise ConfigError(f"--dry-run: learner {learner!r} has no preflight (cohort learners and tracer do)")
    unit = "TRACER steps (generation rounds)" if isinstance(cfg, TracerConfig) else "optimizer steps"
    lines = [f"councilzoo train {learner} --dry-run: {cfg.max_steps} {unit} into {cfg.output_dir}, "
             f"assuming {gpu_gib:.0f} GiB GPUs"]  # fmt: skip
    if not plans:
        lines.append("no trained model (generation.enabled is false): controllers only, no GPU needed")
    errors = []
    for plan in plans:
        if isinstance(plan, tuple):
            where, message = plan
            lines += [f"{where}:", f"  error: {message}"]
            errors.append(f"{where}: {message}")
            continue
        lines += describe(plan)
        for level, text in _run_checks(plan):
            lines.append(f"  {level}: {text}")
            if level == "error":
                errors.append(f"{plan.where}: {text}")
    verdict = f"{len(errors)} error(s): the run would start wrong" if errors else "no errors"
    return "\n".join([*lines, verdict, *(placement.describe() if placement is not None else [])]), errors


def dry_run(name: str, learner: type, cfg: Any, machines: Any, resume: bool, gpu_gib: float) -> int:
    """``councilzoo train NAME CONFIG --dry-run``: print the preflight and, for a learner that starts
    worlds, their placement plan on ``machines`` (None: this machine), each error one line on
    stderr; the exit status: 2 on a setting the docs call wrong or a plan that does not fit, else 0."""
    from councilzoo.learners.placement import Machines

    plan, unplaced = None, []
    if hasattr(learner, "placement"):  # a learner that starts worlds: their placement plan
        try:
            plan = learner.placement(cfg, machines or Machines.here(), resume)
        except ConfigError as err:
            unplaced.append(f"placement: {err}")
    report, errors = preflight(name, cfg, gpu_gib, plan)
    print(report)
    errors = errors or unplaced  # a batch setting the preflight names stops the plan too
    for error in errors:
        print(f"councilzoo train: error: {error}", file=sys.stderr)
    return 2 if errors else 0
