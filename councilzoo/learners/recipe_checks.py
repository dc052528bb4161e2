"""Checks of a training recipe that a run makes before any model loads (and a dry run can call).

Each ``check_*`` function raises ``ConfigError`` with one line naming the setting and what works;
the config classes call them in validation, so a wrong recipe stops before work starts. They
catch settings that would not fail but would waste or corrupt a long run:

- training on an evaluation split or an evaluation-only benchmark (``check_training_data``);
- a paraphrase ``view`` on items that have too few paraphrases, which would silently train on the
  original wording (``check_views``);
- vLLM sleep mode together with councilzoo's own generation paths, which call the engine
  directly and would meet a sleeping engine (``check_sleep_mode``);
- TRACER's world of several processes under ZeRO-3 or FSDP, whose parameter gathers need every
  rank while only rank 0 plays the episodes (``check_tracer_world``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from councilzoo.config import ConfigError

__all__ = [
    "check_training_data", "check_views", "check_sleep_mode", "check_tracer_world", "GIB", "STATE_BYTES",
    "training_gib", "vllm_gib",
]

# Splits that hold a benchmark's scored items.
EVALUATION_SPLITS = ("test", "testmini")

# Benchmarks with no training split of their own (whatever split name their hub copy uses).
EVALUATION_SETS = (
    "math500", "gpqa_diamond", "amc23", "aime24", "hle", "mmlu_pro", "humaneval", "livecodebench",
    "mathvista", "mathverse", "mathvision", "wemath",
)  # fmt: skip


def check_training_data(dataset: str, split: str, where: str) -> None:
    """Refuse a training set that is an evaluation split or an evaluation-only benchmark."""
    if split in EVALUATION_SPLITS:
        raise ConfigError(
            f"{where}: split {split!r} of {dataset!r} is an evaluation split; train on a training split "
            "(e.g. 'train') and evaluate on this one in the eval block"
        )
    if dataset in EVALUATION_SETS:
        raise ConfigError(
            f"{where}: {dataset!r} is an evaluation benchmark; train on a training set (gsm8k train, "
            "multimodal_open_r1 train, a local file) and evaluate on it in the eval block"
        )


def check_views(items: Iterable[Any], views: Mapping[str, int], where: str) -> None:
    """Every item must have at least ``view`` paraphrases for each member's ``view`` (> 0); else
    ``paraphrase`` would give some members the original wording (no diversity, no error)."""
    wanted = {name: v for name, v in views.items() if v > 0}
    if not wanted:
        return
    name, view = max(wanted.items(), key=lambda kv: kv[1])
    for item in items:
        have = len(item.metadata.get("paraphrases", ()))
        if have < view:
            raise ConfigError(
                f"{where}: member {name!r} has view {view} but item {item.id!r} has {have} paraphrase(s); "
                "write paraphrases with `councilzoo paraphrase` and point data.paraphrases at the file, "
                "or use view 0"
            )


def check_sleep_mode(settings: Mapping[str, Any], owned_paths: Iterable[str], where: str) -> None:
    """Refuse ``vllm_enable_sleep_mode`` when councilzoo generates on TRL's colocated engine itself
    (``owned_paths``: held-out evaluation, seeded sampling, TRACER's episodes): TRL wakes the engine
    for its own generation only, so ours would meet released weights and KV cache."""
    owned = list(owned_paths)
    if settings.get("vllm_enable_sleep_mode") and settings.get("use_vllm") and owned:
        raise ConfigError(
            f"{where}: vllm_enable_sleep_mode is not supported with {', '.join(owned)} (councilzoo calls "
            "the colocated engine directly); set vllm_enable_sleep_mode: false"
        )


def check_tracer_world(distributed_type: str | None, world_size: int) -> None:
    """TRACER's episodes are played on rank 0 and broadcast: a sharded world (ZeRO-3, FSDP) would
    wait on rank 0's generation for parameters the other ranks never gather."""
    if world_size > 1 and distributed_type in ("DEEPSPEED_ZERO3", "FSDP"):
        raise ConfigError(
            f"TRACER on {world_size} processes needs replicated weights (DDP or ZeRO-2, LoRA on a model "
            f"that fits one GPU), got {distributed_type}"
        )


# -- GPU memory per process (docs/learners.md, "GPU memory") --------------------------------------
GIB = 2**30

# Bytes a parameter for full fine-tuning with bf16 autocast over fp32 master weights and AdamW:
# (held whole on every GPU, split over the N processes).
STATE_BYTES = {
    "ddp": (4 + 4 + 8, 0),  # fp32 weights, fp32 gradients, Adam's m and v
    "zero2": (2, 2 + 4 + 8),  # bf16 weights whole; bf16 gradients, fp32 master, m and v split
    "zero3": (0, 2 + 2 + 4 + 8),  # everything split (one layer at a time gathered, not counted)
}


def training_gib(params: float, processes: int, sharding: str) -> float:
    """GiB a GPU holds for weights, gradients and optimizer states (no activations)."""
    whole, split = STATE_BYTES[sharding]
    return params * (whole + split / processes) / GIB


def vllm_gib(params: float, kv_bytes_per_token: int, sequences: int, max_model_length: int) -> float:
    """GiB a colocated vLLM engine needs to hold its bf16 weights and the KV cache of ``sequences``
    at ``max_model_length`` tokens at once (its CUDA graphs and activations, ~1-2 GiB, not counted)."""
    return (2 * params + kv_bytes_per_token * sequences * max_model_length) / GIB
