"""One cohort member's world: its GRPOTrainer, joined to the cohort from the world's main process.

``python -m councilzoo.learners.corl.member OUT/plan.json --world I`` is what the launcher starts
(under ``torchrun`` or ``accelerate launch`` for a world of several processes). It reads its world
from the placement plan (``learners/placement.py``, ``read_world``): the learner class, the
resolved config, the ``GRPOConfig`` arguments, the fingerprint and whether to resume; it computes
none of them again. ``run_member`` joins the cohort link (peer rules, rank 0 only), agrees with
the peers on the checkpoint to resume from, builds the member's trainer (``member_trainer``: its
round-ordered dataset and reward functions), trains and saves the final model (``save_member``).
A ``shared_base`` group's world (``shared_world.py``) builds and saves its members' trainers with
the same functions.
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import hashlib
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from councilzoo.agents.prompts import member_prompt
from councilzoo.config import ConfigError, load_config
from councilzoo.envs.rewards import PEER_RULES
from councilzoo.learners import engine
from councilzoo.learners.corl.config import CoRLConfig
from councilzoo.learners.corl.link import CohortLink
from councilzoo.learners.corl.rounds import problem_rows
from councilzoo.learners.corl.seeded_sampling import SeededSampling
from councilzoo.learners.data import load_items
from councilzoo.learners.live_policy import vllm_mode
from councilzoo.learners.placement import Placement
from councilzoo.processes import pid_alive
from councilzoo.tasks import Problem, answers_equivalent, answers_for_batch

__all__ = [
    "HeldOutAccuracy", "member_model_path", "member_sees_images", "run_member", "member_settings",
    "member_trainer", "save_member", "last_row", "resume_checkpoint", "read_world", "quiet_loading",
    "LAUNCHER_ENV", "PR_SET_PDEATHSIG", "die_with_launcher", "set_parent_death_signal", "main",
]


class HeldOutAccuracy(engine.MetricsFile):
    """Greedy accuracy of the member on held-out items before training and every ``eval_steps``
    optimizer steps (and at the end), in the member's prompt style and cut at its stop strings, as
    it samples in training (a base model prompted with exemplars otherwise writes the next
    question, whose numbers the extraction reads), one JSON line per evaluation in ``path`` (main process):
    the accuracy and each item's hit (0/1, in item order), so runs can be compared item by item.

    Every rank of the member's world evaluates a shard of the items and rank 0 gathers the hits:
    under ZeRO-3 and FSDP each forward all-gathers parameters, so a generation on rank 0 alone
    would wait forever for the others. Shards are padded to equal length (a shard's last item
    repeated, its result dropped), so every rank makes the same generate calls, and FSDP's synced
    decoding (transformers' ``synced_gpus``) keeps their forwards in step. With ``use_vllm``
    (colocated, or a server), the items go through vLLM after a weight push (``live_policy``).
    ``bind(trainer)`` must be called before training. The accuracy is also the ``eval_accuracy``
    of the trainer's metrics row of that step (step 0: a row of its own), so it reaches
    ``metrics.jsonl``, the progress line and every tracker of ``report_to`` (TensorBoard's
    ``eval/accuracy``) like the trainer's own metrics."""

    def __init__(
        self, path: Path, problems: Sequence[Problem], every: int, max_new_tokens: int,
        style: str = "default", stop: Sequence[str] = (),
    ) -> None:
        super().__init__(path)
        self.problems, self.every, self.max_new_tokens = list(problems), every, max_new_tokens
        self.style, self.stop = style, tuple(stop)
        self.trainer: Any = None

    def bind(self, trainer: Any) -> None:
        self.trainer = trainer

    def _evaluate(self, state) -> float | None:
        """The accuracy on rank 0 (None on the other ranks), also appended to ``path``."""
        from councilzoo.agents.base import Sampling
        from councilzoo.learners.live_policy import policy_generator

        acc = self.trainer.accelerator
        rank, world = acc.process_index, acc.num_processes
        mine = list(range(rank, len(self.problems), world))
        width = -(-len(self.problems) // world)
        padded = mine + [mine[-1] if mine else 0] * (width - len(mine))
        greedy = Sampling(max_new_tokens=self.max_new_tokens, temperature=0.0, stop=self.stop)
        with policy_generator(self.trainer) as generator:
            images = generator.accepts_images
            prompts = [member_prompt(self.problems[i], 0, images, self.style) for i in padded]
            replies = [g[0] for g in generator.generate(prompts, n=1, sampling=greedy)][: len(mine)]
        hits = dict(zip(mine, self._hits(mine, replies), strict=True))
        if world > 1:
            from accelerate.utils import gather_object

            hits = {i: hit for shard in gather_object([hits]) for i, hit in shard.items()}
        if state.is_world_process_zero:
            row = {"step": state.global_step, "accuracy": sum(hits.values()) / len(hits), "items": len(hits),
                   "hits": [int(hits[i]) for i in sorted(hits)]}  # per item, for paired statistics
            with self.path.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            return row["accuracy"]
        return None

    def _hits(self, indices: list[int], replies: list[Any]) -> list[bool]:
        """Whether each reply's answer equals its item's gold (code: each program's output
        signature, all run in one sandbox call); a reply cut at the token limit is read as such."""
        problems = [self.problems[i] for i in indices]
        answers = answers_for_batch([(p, [r.text]) for p, r in zip(problems, replies, strict=True)],
                                    truncated=[[r.finish_reason == "length"] for r in replies])
        return [answers_equivalent(a, p.answer, p.kind) for [a], p in zip(answers, problems, strict=True)]

    def on_train_begin(self, args, state, control, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
        if state.global_step == 0:
            accuracy = self._evaluate(state)
            if accuracy is not None:
                self.trainer.log({"eval_accuracy": accuracy})

    def on_log(self, args, state, control, logs=None, **kwargs):
        return None

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.every == 0 or state.global_step == state.max_steps:
            accuracy = self._evaluate(state)
            if accuracy is not None:
                # averaged into the row the trainer logs right after this callback (engine.trainer_class)
                self.trainer.log_metric("eval_accuracy", accuracy, "train")


def member_model_path(cfg: CoRLConfig, index: int) -> str:
    """The member's model folder: a resolved local/hub model, or its built tiny model (in a
    ``shared_base`` group, the group's first member's)."""
    from councilzoo.agents.generators.model_lookup import resolve_model_path

    member = cfg.members[index]
    if member.tiny_family:
        first = cfg.base_groups()[member.shared_base][0] if member.shared_base else index
        return str(cfg.tiny_model_dir(first))
    return resolve_model_path(member.model)


def member_sees_images(model_path: str) -> bool:
    """Whether the member's model is a vision-language model (it then trains on the images)."""
    from transformers import AutoConfig

    from councilzoo.agents.generators.model_lookup import is_vision_language

    return is_vision_language(AutoConfig.from_pretrained(model_path))


def completion_prompts(model_path: str) -> Callable[[list[dict]], list[dict] | str]:
    """How the member's prompt rows are written: chat messages, which TRL renders through the
    chat template, or, for a model without one (a base model), its completion text."""
    from transformers import AutoTokenizer

    from councilzoo.agents.generators.chat_template import completion_text

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if getattr(tokenizer, "chat_template", None):
        return lambda messages: messages
    return lambda messages: completion_text(messages, tokenizer.bos_token)


def resume_checkpoint(cfg: CoRLConfig, index: int, link: Any, resume: bool) -> str | None:
    """The checkpoint every member has (the newest common step), or None to start fresh."""
    mine = engine.checkpoint_steps(cfg.member_dir(index)) if resume else []
    steps = link.agree_on_checkpoint(mine) if link is not None else (max(mine) if mine else None)
    return str(cfg.member_dir(index) / f"checkpoint-{steps}") if steps is not None else None


def member_settings(cfg: CoRLConfig, index: int, plan: Placement | None) -> tuple[Any, str]:
    """Member ``index``'s ``GRPOConfig`` and the cohort's fingerprint: the ``plan``'s (what the
    launcher starts), or without one (a member run in this process) computed here for this
    process's world."""
    if plan is None:
        return cfg.member_args(index), cfg.fingerprint()
    [member] = [m for m in plan.world_of(index).members if m.index == index]
    return engine.grpo_config(member.grpo, member.name), plan.fingerprint


def run_member(
    cfg: CoRLConfig,
    index: int,
    reward_functions: Callable[..., list],
    resume: bool = False,
    callbacks: Sequence[Any] = (),
    plan: Placement | None = None,
) -> dict[str, float]:
    """Train member ``index`` in this process's world; returns its last logged row (main process).

    ``reward_functions(cfg, index, problems, link)`` gives the learner's TRL reward functions.
    Peer rules join the cohort link from the world's main process; every member must agree on the
    config fingerprint and on the checkpoint to resume from. The settings are the ``plan``'s where
    given (``member_settings``).
    """
    quiet_loading()
    args, fingerprint = member_settings(cfg, index, plan)
    rank = int(os.environ.get("RANK", "0"))
    link = None
    if cfg.reward_rule in PEER_RULES and rank == 0:
        link = CohortLink(
            cfg.distributed, index, len(cfg.members), run_id="cohort", fingerprint=fingerprint
        )
    with link if link is not None else nullcontext():
        checkpoint = resume_checkpoint(cfg, index, link, resume) if rank == 0 else None
        checkpoint = _broadcast_from_main(checkpoint)
        trainer = member_trainer(cfg, index, args, fingerprint, reward_functions, link, callbacks)
        trainer.train(resume_from_checkpoint=checkpoint)
        save_member(cfg, index, trainer)
    engine.leave_world(trainer)
    return last_row(trainer)


def member_trainer(
    cfg: CoRLConfig,
    index: int,
    args: Any,
    fingerprint: str,
    reward_functions: Callable[..., list],
    link: Any,
    callbacks: Sequence[Any] = (),
    shared_base: Any = None,
) -> Any:
    """Member ``index``'s trainer on ``args``: its round-ordered dataset, reward functions (peer
    labels through ``link``), metrics, progress and held-out evaluation. ``shared_base``: the
    group's ``PeftModel``, of which the trainer trains the member's adapter (named after the
    member), instead of loading the member's model with its ``peft`` settings."""
    problems = load_items(cfg.data, cfg.seed, cfg.views)
    model_path = member_model_path(cfg, index)
    member = cfg.members[index]
    view, vlm = member.view, member_sees_images(model_path)
    if cfg.seeded_sampling and vlm:
        raise ConfigError(f"member {member.name!r}: seeded_sampling is for text models, not VLMs")
    if vlm and cfg.eval.eval_steps and vllm_mode(args) == "server":
        raise ConfigError(f"member {member.name!r}: held-out evaluation through a vLLM server is for text "
                          "models; use vllm_mode: colocate for a VLM, or no eval")
    style = cfg.member_style(index)
    as_text = (lambda messages: messages) if vlm else completion_prompts(model_path)  # VLMs: processors
    rows = problem_rows(
        problems, cfg.seed, engine.rounds_needed(args), cfg.prompts_per_step,
        lambda p: as_text(member_prompt(p, view, vlm, style)),
    )
    _tracker_env(cfg, member.name, fingerprint)
    if cfg.eval.eval_steps:
        held_out = HeldOutAccuracy(
            cfg.member_dir(index) / "eval.jsonl",
            load_items(cfg.eval, cfg.seed),
            cfg.eval.eval_steps,
            cfg.max_completion_length,
            style,
            member.stop,
        )
        callbacks = [*callbacks, held_out]
    cbs = [
        engine.MetricsFile(cfg.member_dir(index) / "metrics.jsonl"),
        engine.StepProgress(member.name, index),
        *callbacks,
    ]
    rollout = SeededSampling(cfg.seed, cfg.num_generations, member.stop) if cfg.seeded_sampling else None
    rewards = reward_functions(cfg, index, problems, link)
    if shared_base is None:
        return engine.build_trainer(
            model_path, model_path, args, rows, rewards, cbs, member.peft, rollout_func=rollout
        )
    return engine.build_trainer(
        shared_base, model_path, args, rows, rewards, cbs, rollout_func=rollout, adapter=member.name
    )


def save_member(cfg: CoRLConfig, index: int, trainer: Any) -> None:
    """After training: the world's peak GPU memory, the final model in ``final/`` and what the
    world really trained with (``world.json``)."""
    _record_gpu_peak(trainer, cfg.member_dir(index) / "gpu_memory.json", cfg.members[index].name)
    final = cfg.member_dir(index) / "final"
    if trainer.is_fsdp_enabled:  # whole weights in final/, whatever the checkpoints' state-dict type
        trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
    trainer.save_model(str(final))
    if trainer.accelerator.is_main_process:
        trainer.processing_class.save_pretrained(str(final))
        _write_world(cfg.member_dir(index) / "world.json", trainer)


def last_row(trainer: Any) -> dict[str, float]:
    """The trainer's last logged row with a reward (empty if none)."""
    history = [r for r in trainer.state.log_history if "reward" in r]
    return history[-1] if history else {}


def _record_gpu_peak(trainer: Any, path: Path, name: str) -> None:
    """On a GPU: each rank's peak allocated memory (``torch.cuda.max_memory_allocated``, MiB; a
    colocated vLLM engine's weights and KV cache included) to ``path`` and stdout, from rank 0."""
    import torch

    if not torch.cuda.is_available():
        return
    from accelerate.utils import gather_object

    peaks = gather_object([round(torch.cuda.max_memory_allocated() / 2**20, 1)])
    if trainer.accelerator.is_main_process:
        path.write_text(json.dumps({"gpu_peak_memory_mib_per_rank": peaks}) + "\n")
        print(f"{name}: peak GPU memory (torch.cuda.max_memory_allocated) per rank: {peaks} MiB", flush=True)


def _write_world(path: Path, trainer: Any) -> None:
    """What the world really trained with, as accelerate set it up: its distributed type (FSDP,
    DEEPSPEED, MULTI_GPU, MULTI_CPU, NO), process count and the trained model's class (FSDP2 wraps
    it as ``FSDP<Model>``, DeepSpeed as ``DeepSpeedEngine``): what a recipe's config asked for is
    not proof that it ran."""
    state = trainer.accelerator.state
    world = {
        "distributed_type": str(state.distributed_type.value),
        "num_processes": state.num_processes,
        "model_class": type(trainer.model_wrapped).__name__,
    }
    path.write_text(json.dumps(world, indent=2) + "\n")


def _broadcast_from_main(value: Any) -> Any:
    """``value`` of world rank 0 on every rank (a no-op outside a distributed world)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _tracker_env(cfg: CoRLConfig, member: str, fingerprint: str) -> None:
    """Per-member trackers: one wandb run per member (stable id, so a resume continues it), grouped
    by the cohort's run; TensorBoard writes under the member's own folder."""
    run = Path(cfg.output_dir).name
    os.environ.setdefault("WANDB_PROJECT", cfg.project)
    os.environ.setdefault("WANDB_RUN_GROUP", run)
    os.environ.setdefault(
        "WANDB_RUN_ID", hashlib.sha256(f"{fingerprint}/{member}".encode()).hexdigest()[:12]
    )
    os.environ.setdefault("WANDB_RESUME", "allow")
    os.environ.setdefault("TRACKIO_PROJECT", cfg.project)


def quiet_loading() -> None:
    """No per-file loading bars from transformers and the hub: the step bars are the progress.
    Offline, no hub kernels either (``offline_loading_defaults``): tiny members load no model by name."""
    from transformers.utils import logging as hf_logging

    from councilzoo.agents.generators.model_lookup import offline_loading_defaults

    offline_loading_defaults()
    hf_logging.disable_progress_bar()
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


# Set by the launcher in every member world's environment: its own pid.
LAUNCHER_ENV = "COUNCILZOO_COHORT_LAUNCHER"
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_launcher() -> None:
    """Die with the parent process (``PR_SET_PDEATHSIG``), and exit now if the launcher is already
    gone. A world's processes (torchrun's or accelerate's workers under their agent, the agent under
    the launcher) each die with their parent, so killing the launcher, even with SIGKILL, ends them all."""
    launcher = os.environ.get(LAUNCHER_ENV)
    if launcher is None:
        return
    set_parent_death_signal()
    if not pid_alive(int(launcher)):
        sys.exit(f"the cohort launcher (pid {launcher}) is gone")


def set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    """Have the kernel send ``sig`` to this process when its parent dies (Linux; a no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)



def read_world(argv: Sequence[str] | None, prog: str) -> tuple[Placement, Any, Any, Any]:
    """``PLAN --world I`` of a world's command line: the plan, world ``I``, its learner class and
    the plan's resolved config (what a world process reads before anything else)."""
    from councilzoo.learners.base import get_learner

    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("plan")
    parser.add_argument("--world", type=int, required=True)
    args = parser.parse_args(argv)
    faulthandler.enable()  # a crash in native code (seen once: SIGSEGV in libc) logs its Python stack
    die_with_launcher()
    plan = Placement.read(args.plan)
    learner = get_learner(plan.learner)
    return plan, plan.worlds[args.world], learner, load_config(plan.config, learner.config_class)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m councilzoo.learners.corl.member OUT/plan.json --world I``."""
    plan, world, learner, cfg = read_world(argv, "councilzoo.learners.corl.member")
    [member] = world.members
    run_member(cfg, member.index, learner.reward_functions, resume=plan.resume, plan=plan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
