"""The update engine under every policy-gradient learner: TRL's ``GRPOTrainer``.

councilzoo writes no update loop. A learner hands the trainer three things through its documented
hooks, and TRL does the rest (generation with transformers or vLLM colocate/server and its
importance-sampling correction, GRPO/GSPO/DAPO/Dr. GRPO/BNPO losses, mixed precision with fp32
master weights, micro-batches and accumulation, gradient checkpointing, LoRA through
``peft_config``, DeepSpeed/FSDP through ``accelerate launch``, trackers, checkpoints, resume):

- a **dataset** of prompt rows (Co-RL: its items laid out round after round,
  ``learners/corl/rounds.py``; TRACER: placeholders, its ``rollout_func`` plays the episodes).
  Shuffling is off, so the trainer's ``RepeatSampler`` walks the rows in their order;
- **reward functions** (the learner's credit assignment; they get the dataset columns);
- **callbacks** (``MetricsFile``: one JSON line per logged step; ``StepProgress``: a bar over
  optimizer steps with reward and label accuracy, or one plain line a step in a log file;
  ``CheckpointManifest``, always last: the manifest of every ``checkpoint-N`` folder, which a
  resume verifies).

``RunSettings.of(cfg).grpo_config(Round(...), run_name, overrides)`` turns a learner config's
run-level settings into a ``GRPOConfig``: any ``GRPOConfig`` field may be set in a config's
``trainer:`` mapping (validated by name before any model loads). The defaults differ from TRL's in
three places, each on purpose: ``loss_type="grpo"`` with ``importance_sampling_level="sequence"``
(GSPO as in its paper), ``shuffle_dataset=False`` (the row order is the schedule) and ``use_cpu``
when no accelerator is present.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from councilzoo.agents.generators.chat_template import chat_template_kwargs, check_template_date
from councilzoo.config import ConfigError, check_fields
from councilzoo.learners.checkpoint import verified, write_manifest
from councilzoo.learners.logging import read_metrics
from councilzoo.learners.placement import fit_round
from councilzoo.progress import Progress, phase

__all__ = [
    "check_trainer_overrides", "Round", "RunSettings", "grpo_config", "optimizer_steps_per_round",
    "rounds_needed",
    "current_world_size",
    "completion_text", "cut_at_token_limit", "build_trainer", "processing_class", "leave_world",
    "latest_trainer_checkpoint", "checkpoint_steps", "trainer_class", "MetricsFile", "CheckpointManifest",
    "StepProgress",
]

# Keys a learner sets itself; a config's ``trainer:`` mapping may not override them.
_OWNED_KEYS = frozenset(
    {
        "output_dir",
        "max_steps",
        "seed",
        "save_steps",
        "report_to",
        "num_generations",
        "generation_batch_size",
        "steps_per_generation",
        "max_completion_length",
        "shuffle_dataset",
        "remove_unused_columns",
        "run_name",
    }
)
# transformers 5 renamed gradient checkpointing (TRL's GRPOConfig still uses the old name): the
# deprecation says nothing a user of our configs can act on, so it is not printed.
warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.* is deprecated", category=FutureWarning)
_DEFAULTS: dict[str, Any] = {
    "loss_type": "grpo",
    "importance_sampling_level": "sequence",
    "beta": 0.0,
    "logging_steps": 1,
    "save_total_limit": 2,
    "disable_tqdm": True,  # StepProgress draws the bar
    "log_completions": False,
}


def check_trainer_overrides(overrides: Mapping[str, Any], where: str) -> None:
    """Reject unknown ``GRPOConfig`` names, values of the wrong type for their ``GRPOConfig`` field
    and keys the learner owns, naming the config path; before any model loads."""
    from trl import GRPOConfig

    owned = sorted(set(overrides) & _OWNED_KEYS)
    problems = [f"{where}: {owned} are set by the learner's own keys, not under 'trainer'"] if owned else []
    try:
        check_fields({k: v for k, v in overrides.items() if k not in _OWNED_KEYS}, GRPOConfig, where)
    except ConfigError as err:
        problems += err.problems
    if problems:
        raise ConfigError("\n".join(problems))


@dataclass(frozen=True)
class Round:
    """One generation round: ``prompts`` items x ``num_generations`` completions of at most
    ``max_completion_length`` tokens (TRL's ``generation_batch_size`` is their product)."""

    prompts: int
    num_generations: int
    max_completion_length: int


@dataclass(frozen=True)
class RunSettings:
    """A learner run's settings that ``GRPOConfig`` takes from the learner's own keys (the
    ``Learner`` contract's TRL names), not from a config's ``trainer:`` mapping.

    ``RunSettings.of(cfg)`` reads them from any learner config; ``grpo_config`` adds the round and
    the ``trainer:`` overrides. A learner whose run is not one trainer's (a cohort member's folder,
    several updates a round) changes them with ``dataclasses.replace``."""

    output_dir: str | Path
    max_steps: int
    seed: int
    save_steps: int
    report_to: Sequence[str]

    @classmethod
    def of(cls, cfg: Any) -> RunSettings:
        return cls(*(getattr(cfg, f.name) for f in fields(cls)))

    def grpo_settings(
        self,
        per_round: Round,
        run_name: str,
        overrides: Mapping[str, Any] = (),
        world_size: int | None = None,
        where: str | None = None,
        cpu: bool | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments of a ``GRPOConfig`` for one model, as plain data (a placement plan
        stores them): our defaults, then ``overrides`` (any GRPOConfig field).

        Unless overridden, the micro-batch is the whole round on each process and accumulation is
        1, so a round is one optimizer step. The batch settings are checked for ``world_size``
        processes (default: this process's world) by ``placement.fit_round``; errors name ``where``
        (default: ``run_name``). ``cpu`` (default: no CUDA here) trains on CPUs in fp32.
        """
        settings = {**_DEFAULTS, **dict(overrides)}
        # TRL renders the training prompts: the same fixed date as our own paths
        settings["chat_template_kwargs"] = {
            **chat_template_kwargs(), **(settings.get("chat_template_kwargs") or {})
        }
        if cpu is None:
            import torch

            cpu = not torch.cuda.is_available()
        if cpu and not settings.get("use_cpu"):
            settings.update(use_cpu=True, bf16=settings.get("bf16", False), fp16=False)
        world = current_world_size() if world_size is None else world_size
        where = where or repr(run_name)
        settings = fit_round(settings, per_round.prompts, per_round.num_generations, world, where)
        return dict(
            output_dir=str(self.output_dir),
            max_steps=self.max_steps,
            seed=self.seed,
            save_steps=self.save_steps if self.save_steps > 0 else self.max_steps,
            save_strategy="steps",
            report_to=[r for r in self.report_to if r != "none"] or "none",
            num_generations=per_round.num_generations,
            generation_batch_size=per_round.prompts * per_round.num_generations,
            max_completion_length=per_round.max_completion_length,
            shuffle_dataset=False,
            remove_unused_columns=False,
            run_name=run_name,
            **settings,
        )

    def grpo_config(self, per_round: Round, run_name: str, overrides: Mapping[str, Any] = (),
                    world_size: int | None = None, where: str | None = None) -> Any:
        """``GRPOConfig(**grpo_settings(...))`` (this machine decides CPU or GPU)."""
        return grpo_config(self.grpo_settings(per_round, run_name, overrides, world_size, where), run_name)


def grpo_config(settings: Mapping[str, Any], run_name: str) -> Any:
    """TRL's ``GRPOConfig`` of ``grpo_settings``; its own errors as one ``ConfigError`` line."""
    from trl import GRPOConfig

    try:
        return GRPOConfig(**settings)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"trainer settings of {run_name!r}: {exc}") from exc


def optimizer_steps_per_round(args: Any) -> float:
    """Optimizer steps the trainer takes on one generation round (x ``num_iterations`` passes)."""
    return args.steps_per_generation * args.num_iterations / args.gradient_accumulation_steps


def rounds_needed(args: Any) -> int:
    return math.ceil(args.max_steps / optimizer_steps_per_round(args))


def current_world_size() -> int:
    """Processes of this process's world (``WORLD_SIZE``; 1 outside torchrun/accelerate)."""
    import os

    return int(os.environ.get("WORLD_SIZE", "1"))


def completion_text(completion: Any) -> str:
    """The text of one TRL completion (conversational: a list of messages; else a string)."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if isinstance(m, Mapping))


def cut_at_token_limit(trainer: Any, completion_ids: Sequence[Sequence[int]]) -> list[bool]:
    """Whether each completion ran into the token limit, by TRL's own test (that of
    ``mask_truncated_completions``): its last token is neither an EOS nor the pad token. Without
    a trainer (a reward called outside TRL) or ids (empty), none did."""
    if trainer is None or not any(completion_ids):
        return [False] * len(completion_ids)
    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)  # a VLM's processor
    ends = {*trainer.eos_token_ids, tokenizer.pad_token_id}
    return [bool(ids) and ids[-1] not in ends for ids in completion_ids]


def build_trainer(
    model: Any,
    tokenizer_path: str,
    args: Any,
    rows: list[dict],
    reward_funcs: list,
    callbacks: Sequence[Any] = (),
    peft: Mapping[str, Any] | None = None,
    rollout_func: Any = None,
    adapter: str | None = None,
) -> Any:
    """A ``GRPOTrainer`` (``trainer_class``) on ``rows`` with our callbacks in place of TRL's printed
    progress. ``model`` is a folder, or a loaded model: with ``adapter``, a ``PeftModel`` that holds
    several adapters on one base (``learners/shared_base.py``), of which this trainer trains and
    saves ``adapter``.

    Callbacks that write into checkpoints go in ``callbacks``: ``CheckpointManifest`` is added
    after them, so each checkpoint's manifest lists what they wrote.
    """
    from datasets import Dataset

    peft_config = None
    if peft:
        from peft import LoraConfig

        peft_config = LoraConfig(task_type="CAUSAL_LM", **dict(peft))
    tokenizer = processing_class(tokenizer_path)
    if args.chat_template_kwargs and "date_string" not in chat_template_kwargs(tokenizer):
        # a template that reads no date is given none (a processor would pass it to its tokenizer)
        args.chat_template_kwargs = {k: v for k, v in args.chat_template_kwargs.items() if k != "date_string"}
    trainer = trainer_class()(
        model=model,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=list(callbacks),
        rollout_func=rollout_func,
        adapter=adapter,
    )
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    if args.use_vllm and args.vllm_importance_sampling_correction:
        _log_masked_fraction(trainer)
    trainer.remove_callback(PrinterCallback)  # StepProgress shows the step's key numbers instead
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(CheckpointManifest())
    for fn in [*reward_funcs, *callbacks]:  # what logs into the trainer's rows
        if hasattr(fn, "bind"):
            fn.bind(trainer)
    return trainer


def leave_world(trainer: Any) -> None:
    """Every rank leaves together, then the process group is destroyed (a no-op in a one-process
    world). Rank 0 saves and reports after the others are done, and a rank that exited with its
    gloo group still alive while rank 0 was busy was once seen to abort (SIGABRT), failing the run."""
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.end_training()


def masked_fraction(
    ratio: Any, completion_mask: Any, mode: str, clip_min: float | None, clip_max: float | None
) -> tuple[float, float]:
    """(tokens, completion tokens) where TRL's vLLM importance-sampling ``ratio`` (per token, or
    one per sequence) dropped or bounded the token: zeroed by a ``*_mask`` mode, at a clip bound
    under a ``*_truncate`` mode."""
    mask = completion_mask.bool()
    ratio = ratio.expand(mask.shape) if ratio.shape[-1] == 1 else ratio
    if mode.endswith("_mask"):
        hit = ratio == 0
    else:
        upper = ratio >= (clip_max if clip_max is not None else float("inf"))
        hit = upper | (ratio <= (clip_min if clip_min is not None else float("-inf")))
    return float((hit & mask).sum()), float(mask.sum())


def _log_masked_fraction(trainer: Any) -> None:
    """Log ``sampling/importance_sampling_masked_fraction`` each round: the share of the world's
    completion tokens whose vLLM importance-sampling ratio the configured mode masked or clipped
    (TRL logs the ratio's min, mean and max only). A sequence-level mode masks whole sequences, the
    longer ones more often, since their ratio is a product over more tokens."""
    import torch

    args = trainer.args

    def log(out: Any) -> None:
        if out.get("importance_sampling_ratio") is None:
            return
        hit, total = masked_fraction(
            out["importance_sampling_ratio"], out["completion_mask"], args.vllm_importance_sampling_mode,
            args.vllm_importance_sampling_clip_min, args.vllm_importance_sampling_clip_max,
        )  # fmt: skip
        local = torch.tensor([[hit, total]], device=trainer.accelerator.device)
        hit, total = trainer.accelerator.gather(local).sum(dim=0).tolist()
        trainer.log_metric("sampling/importance_sampling_masked_fraction", hit / max(total, 1.0))

    trainer.generation_hooks.append(log)


_TRAINER_CLASS: list[type] = []


def trainer_class() -> type:
    """``GRPOTrainer`` with the extension points councilzoo needs and TRL has no public hook for,
    written to be upstreamed (docs/ARCHITECTURE.md lists the private names it relies on;
    tests/test_trl_surface.py fails when TRL or transformers changes them):

    - ``generation_hooks``: callables given each generation round's batch (what
      ``_generate_and_score_completions`` returns: completion mask, advantages, importance ratios);
    - ``log_metric(name, value, mode=None)``: a figure averaged into the step's logged row exactly as
      TRL's own metrics are (TRL's ``_metrics``), so it reaches ``metrics.jsonl`` and every tracker;
    - ``adapter``: the trainer trains one adapter of a ``PeftModel`` that holds several on one base,
      and its checkpoints and saved model hold that adapter only, in the folder's subfolder named
      after it, where transformers' resume finds it (PEFT saves every adapter of the model by
      default, so a resume would overwrite the peers' adapters).
    """
    if not _TRAINER_CLASS:
        import os

        import torch
        from transformers.trainer import TRAINING_ARGS_NAME
        from trl import GRPOTrainer

        class CouncilGRPOTrainer(GRPOTrainer):
            def __init__(self, *args: Any, adapter: str | None = None, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                self.adapter = adapter
                self.generation_hooks: list[Any] = []

            def log_metric(self, name: str, value: float, mode: str | None = None) -> None:
                self._metrics[mode or ("train" if self.model.training else "eval")][name].append(value)

            def _generate_and_score_completions(self, inputs: Any) -> Any:
                out = super()._generate_and_score_completions(inputs)
                for hook in self.generation_hooks:
                    hook(out)
                return out

            def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
                if self.adapter is None:
                    return super()._save(output_dir, state_dict)
                output_dir = output_dir or self.args.output_dir
                if self.args.should_save:
                    self.model.save_pretrained(output_dir, selected_adapters=[self.adapter])
                    self.processing_class.save_pretrained(output_dir)
                    torch.save(self.args, os.path.join(output_dir, TRAINING_ARGS_NAME))
                return None

        _TRAINER_CLASS.append(CouncilGRPOTrainer)
    return _TRAINER_CLASS[0]


def processing_class(path: str) -> Any:
    """The model's processor for a vision-language model (what GRPOTrainer needs to encode
    images), else its tokenizer. The processor pads on the left, as TRL's own default does: the
    trainer re-encodes the prompts with it and aligns them with its left-padded prompt ids
    (Qwen2-VL's M-RoPE positions break on a right-padded copy)."""
    from transformers import AutoConfig, AutoProcessor, AutoTokenizer

    from councilzoo.agents.generators.model_lookup import is_vision_language

    if is_vision_language(AutoConfig.from_pretrained(path)):
        processing = AutoProcessor.from_pretrained(path, padding_side="left", truncation_side="left")
    else:
        processing = AutoTokenizer.from_pretrained(path)
    check_template_date(processing)  # TRL renders every training prompt with it
    return processing


def latest_trainer_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest ``checkpoint-N`` folder under ``output_dir`` that matches its manifest (None if
    none; damaged newer ones are named in a warning)."""
    found = checkpoint_steps(output_dir)
    return Path(output_dir) / f"checkpoint-{max(found)}" if found else None


def checkpoint_steps(output_dir: str | Path, verify: bool = True) -> list[int]:
    """Steps of the ``checkpoint-N`` folders under ``output_dir``, oldest first; with ``verify``
    only those whose files match their manifest (each other one is named in a warning)."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = sorted(
        (int(suffix), path)
        for path in root.glob("checkpoint-*")
        if path.is_dir() and (suffix := path.name.split("-", 1)[1]).isdigit()
    )
    folders = [path for _, path in found]
    kept = set(verified(folders) if verify else folders)
    return [step for step, path in found if path in kept]


def _trainer_callback_base() -> type:
    from transformers import TrainerCallback

    return TrainerCallback


class MetricsFile(_trainer_callback_base()):
    """Appends every logged row (TRL's metrics plus ours) to ``path`` as one JSON line, on the main
    process. On resume, rows past the resumed step are dropped first, so none repeats."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rows = read_metrics(self.path) if self.path.is_file() else []
        kept = [r for r in rows if r.get("step", 0) <= state.global_step]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "train_runtime" in logs:
            return
        row = {
            k: (float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None)
            for k, v in logs.items()
            if isinstance(v, (int, float))
        }
        row["step"] = state.global_step
        with self.path.open("a") as fh:
            fh.write(json.dumps(row) + "\n")


class CheckpointManifest(_trainer_callback_base()):
    """Writes ``checkpoint-N/manifest.json`` once the trainer and every earlier callback have saved
    (``build_trainer`` adds it last), after all processes of the world are done writing."""

    def on_save(self, args, state, control, **kwargs):
        from accelerate import PartialState

        PartialState().wait_for_everyone()
        if state.is_world_process_zero:
            write_manifest(Path(args.output_dir) / f"checkpoint-{state.global_step}")


class StepProgress(_trainer_callback_base()):
    """Progress over optimizer steps with the latest reward and label accuracy (main process): a
    bar on a terminal, one plain line per logged step in a log file (``councilzoo.progress``)."""

    KEYS = ("reward", "label_accuracy", "accuracy", "eval_accuracy")

    def __init__(self, name: str, position: int = 0) -> None:
        self.name, self.position, self.progress = name, position, None

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            if state.global_step == 0:
                phase(f"{self.name}: first step (generation, rewards, update)")
            self.progress = Progress(
                self.name, state.max_steps, initial=state.global_step, position=self.position
            )

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.progress is not None and logs and "train_runtime" not in logs:
            self.progress.update(state.global_step, {k: logs[k] for k in self.KEYS if k in logs})

    def on_train_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.close()
