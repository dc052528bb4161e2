"""TRACER's utterance layer on TRL's ``GRPOTrainer``: one generation round is one TRACER step.

The trainer's ``rollout_func`` hook (TRL calls it at generation time, with the current policy)
runs the step: it plays the step's ``review-v0`` episodes through the rollout engine with the
regret-matching controllers choosing modes, branches them for counterfactual values, updates
the controllers, then picks ``turns_per_step`` of the step's speaking turns (REFRESH / SPEAK
with a label) and samples ``num_candidates`` continuations of each turn's own prompt. Those
groups are the trainer's batch; ``UtteranceReward`` scores them by role against the episode's
label (gold, or the label-free consensus; with ``consensus_votes: samples`` a proposer candidate's
label is the plurality of the other candidates of its group, ``leave_one_out_labels``):

- proposer: +1 if its answer is the label, -1 if wrong or unreadable;
- reviewer: +1 if its verdict matches the pending answer's correctness, -1 if not or if it gives
  none (as a proposer with no answer; the release gave 0, which paid a reviewer for saying nothing);
- both: minus ``cost_penalty * completion_tokens / max_new_tokens`` (optional).

TRL then takes the GSPO steps (``importance_sampling_level="sequence", loss_type="grpo"`` unless
the config's ``generation.trainer`` says otherwise), with LoRA through ``generation.peft``: the
round's completions split into ``generation.minibatches`` minibatches (default 2), one update
each, so every update after the first is off-policy and the sequence-level clip can act (one
update per round would make GSPO's gradient exactly GRPO's). TRL logs the clipped fraction as
``clip_ratio/region_mean`` (``gspo/clip_ratio/region_mean`` in TRACER's metrics).
Turns are resampled (with replacement, seeded) when a step has fewer than ``turns_per_step``, and
subsampled when it has more. The release updated before each real utterance; here the episodes
of a step are played by the policy of the previous step, and the update follows the batch.

One trainer trains one model: the shared model with role prompts (default), or, with separate
role models, the proposer's (the reviewer's model then only generates: a frozen copy of the base,
or with ``agents.shared_base`` the proposer's own base with its adapter switched off).

A world of N processes (``num_processes: N``: the placement plan's one world, started by the
launcher under torchrun) trains as one process with N times the micro-batch: every rank plays
its share of the step's problems, the controllers of every rank learn from the whole step
(gathered in one process's order, ``learner.Tracer.play_step``), every rank picks the same
turns and samples the candidates of its share of them, and trains them (TRL's own split of a
round: rank-major, whole groups of G), so the controllers' update and the round's prompts are
the one-process ones; the sampled text differs (a generate call's batch is another). Weights
must be whole on every rank (DDP or ZeRO-2): under ZeRO-3 or FSDP a rank's generation would
wait for parameter gathers the others never join (refused, ``recipe_checks.check_tracer_world``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from councilzoo.agents.base import Sampling
from councilzoo.agents.factory import ModelSpec, build_model, import_object
from councilzoo.agents.llm import LLMAgent
from councilzoo.agents.parsing import parse_action
from councilzoo.envs.types import Mode
from councilzoo.learners import engine
from councilzoo.learners.live_policy import push_weights, trainer_vllm_generator, vllm_mode
from councilzoo.learners.recipe_checks import check_tracer_world
from councilzoo.learners.tracer.config import ROLES, TracerConfig
from councilzoo.learners.tracer.controller_layer import NO_VERDICT
from councilzoo.tasks import answers_equivalent, plurality

__all__ = ["UtteranceLayer"]

_STEP_PROMPT = [{"role": "user", "content": "tracer step"}]  # dataset placeholder; rollout_func plays


def utterance_args(cfg: TracerConfig, world: int | None = None) -> Any:
    """The ``GRPOConfig`` of TRACER's utterance trainer in a world of ``world`` processes (default:
    this process's): ``TracerConfig.trainer_settings``, the batch split by the placement plan's rule."""
    settings = cfg.trainer_settings(engine.current_world_size() if world is None else world)
    return engine.grpo_config(settings, f"tracer-{cfg.seed}")


def leave_one_out_labels(answers: Sequence[str | None], kind: str) -> list[str | None]:
    """For each of a group's independent samples, the plurality of the *other* samples' answers
    (ties keep the first seen; None when none of them parses): a sample never votes for itself."""
    return [plurality(list(answers[:i]) + list(answers[i + 1:]), kind)[0] for i in range(len(answers))]


class UtteranceReward:
    """TRL reward function of TRACER's candidates (see the module docstring)."""

    __name__ = "tracer_role"

    def __init__(self, cost_penalty: float, max_new_tokens: int) -> None:
        self.cost_penalty, self.max_new_tokens = cost_penalty, max_new_tokens

    def __call__(self, prompts, completions, completion_ids, role, mode, kind, label, pending, **_: Any):
        out = []
        for comp, ids, r, m, k, lab, pend in zip(
            completions, completion_ids, role, mode, kind, label, pending, strict=True
        ):
            action = parse_action(engine.completion_text(comp), r, k, mode=Mode(m))
            if r == "proposer":
                value = 1.0 if answers_equivalent(action.answer, lab, k) else -1.0
            else:
                right = (action.verdict == "RIGHT") == answers_equivalent(pend or None, lab, k)
                value = NO_VERDICT if action.verdict is None else (1.0 if right else -1.0)
            out.append(value - self.cost_penalty * len(ids) / self.max_new_tokens)
        return out


class UtteranceLayer:
    """The trained model, its ``GRPOTrainer``, and the LLM agents that play with it.

    ``callbacks`` are trainer callbacks that save into each checkpoint (TRACER's controllers), so
    the checkpoint's manifest covers them; ``settings`` are the trainer's ``GRPOConfig`` arguments
    as the placement plan decided them (default: ``utterance_args`` for this process's world)."""

    def __init__(
        self, cfg: TracerConfig, play_step: Any, callbacks: Sequence[Any] = (),
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        from councilzoo.agents.generators.adapters import BASE, AdapterGenerator
        from councilzoo.agents.generators.model_lookup import resolve_model_path
        from councilzoo.agents.generators.transformers_backend import TransformersGenerator

        a, g = cfg.agents, cfg.generation
        self.cfg, self.play_step = cfg, play_step
        self.sampling = Sampling(
            max_new_tokens=a.max_new_tokens, temperature=a.temperature, stop=tuple(a.stop)
        )
        path = resolve_model_path(a.model)
        self.shared = a.share_model and "reviewer" not in a.models
        self.trained_roles = ROLES if self.shared else ("proposer",)
        args = utterance_args(cfg) if settings is None else engine.grpo_config(settings, f"tracer-{cfg.seed}")
        self.trainer = engine.build_trainer(
            # fp32 master weights whatever the checkpoint's dtype (transformers 5 would load a bf16
            # checkpoint in bf16, and pure-bf16 AdamW loses most updates); `bf16: true` autocasts
            AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32),
            path,
            args,
            [
                {"prompt": _STEP_PROMPT, "slot": i}
                for i in range(engine.rounds_needed(args) * g.turns_per_step)
            ],
            [UtteranceReward(g.cost_penalty, a.max_new_tokens)],
            callbacks,
            peft=g.peft,
            rollout_func=self.rollout,
        )
        check_tracer_world(sharding(self.trainer.accelerator), self.trainer.accelerator.num_processes)
        if vllm_mode(args):  # TRL's colocated engine or its server plays and samples; pushed by sync()
            self.generator = trainer_vllm_generator(self.trainer)
        else:  # the trainer's model itself, trained in place
            tokenizer = self.trainer.processing_class
            self.generator = TransformersGenerator(self.trainer.model, tokenizer=tokenizer, seed=cfg.seed)
        options = {"sampling": self.sampling, "render": import_object(a.render) if a.render else None}
        if self.shared:
            self.agents = {"*": LLMAgent(self.generator, name="tracer", **options)}
        else:
            self.agents = {"proposer": LLMAgent(self.generator, name="proposer", **options)}
            if a.shared_base:  # the base under the proposer's adapter, the adapter switched off
                tokenizer = self.trainer.processing_class
                base = AdapterGenerator(self.trainer.model, {}, tokenizer=tokenizer, seed=cfg.seed)
                self.agents["reviewer"] = LLMAgent(base.seat(BASE), name="reviewer", **options)
            elif "reviewer" not in a.models:  # a frozen copy of the base model (else built by role_agents)
                frozen = {"model": path, "device": a.device, "seed": cfg.seed}
                spec = ModelSpec("transformers", frozen, agent=options)
                self.agents["reviewer"] = build_model("reviewer", spec)
        self.turns: list = []  # the step's speaking turns (episode, context, mode), set by the learner

    def sync(self) -> None:
        """Make the generator play the trainer's current weights: a no-op with transformers (it
        generates with the trained model), a weight push into vLLM when it changed since the last."""
        if vllm_mode(self.trainer.args):
            push_weights(self.trainer, self.generator)

    def _leave_one_out(self, role: str) -> bool:
        """Whether ``role``'s candidates are scored against their group's other candidates."""
        return self.cfg.label_free and self.cfg.consensus_votes == "samples" and role == "proposer"

    # -- TRL's rollout_func -------------------------------------------------------------------
    def rollout(self, prompts: list, trainer: Any) -> dict[str, list]:
        """This rank's share of one TRACER step's round (``play_and_sample``)."""
        g, acc = self.cfg.generation, trainer.accelerator
        if len(prompts) * acc.num_processes != g.turns_per_step * g.num_candidates:
            raise RuntimeError(
                f"expected {g.turns_per_step} x {g.num_candidates} prompts over {acc.num_processes} "
                f"process(es), got {len(prompts)} on this one"
            )
        return self.play_and_sample(trainer)

    def play_and_sample(self, trainer: Any) -> dict[str, list]:
        """One TRACER step (every rank plays its share and learns from the whole), then this rank's
        share of the round: G candidates of each of its chosen speaking turns. Every rank chooses
        the same turns from the whole step's; rank r samples turns ``r k .. (r + 1) k - 1`` of them
        (k = turns_per_step / world), which is TRL's own split of a round (rank-major, whole groups),
        with a sampling seed of its own."""
        g, acc = self.cfg.generation, trainer.accelerator
        while True:
            problems, labels, metrics = self.play_step()
            turns = [t for t in self.turns if t[1].role in self.trained_roles
                     and (labels[t[0]] is not None or self._leave_one_out(t[1].role))]
            if turns:
                break  # else a step with nothing to train: play the next one
        rng = np.random.default_rng([self.cfg.seed, metrics["step"], 17])
        picked = rng.choice(len(turns), size=g.turns_per_step, replace=len(turns) < g.turns_per_step)
        share = g.turns_per_step // acc.num_processes
        first = acc.process_index * share
        chosen = [turns[k] for k in np.sort(picked)][first:first + share]
        seed = int(rng.integers(2**31))
        if acc.process_index:  # the other ranks' draws independent of rank 0's
            seed = int(np.random.default_rng([seed, acc.process_index]).integers(2**31))
        agent = self.agents.get("proposer", self.agents.get("*"))
        requests = agent.plan([replace(ctx, legal_modes=(mode,)) for _, ctx, mode in chosen])
        groups = self.generator.generate(
            [r.messages for r in requests], n=g.num_candidates, sampling=replace(self.sampling, seed=seed)
        )
        out: dict[str, list] = {
            k: [] for k in ("prompt_ids", "completion_ids", "role", "mode", "kind", "label", "pending")
        }
        for (episode, ctx, mode), group in zip(chosen, groups, strict=True):
            labels_of = [labels[episode]] * len(group)
            if self._leave_one_out(ctx.role):
                answers = [parse_action(c.text, ctx.role, ctx.problem.kind, mode=mode).answer for c in group]
                labels_of = leave_one_out_labels(answers, ctx.problem.kind)
            for c, label in zip(group, labels_of, strict=True):
                out["prompt_ids"].append(list(c.prompt_token_ids))
                out["completion_ids"].append(list(c.token_ids))
                out["role"].append(ctx.role)
                out["mode"].append(int(mode))
                out["kind"].append(ctx.problem.kind)
                out["label"].append(label)
                out["pending"].append(ctx.extras.get("pending_answer") or "")
        # vLLM's sampled-token log-probabilities feed TRL's importance-sampling correction; with
        # transformers TRL scores the old policy itself
        out["logprobs"] = [c.logprobs for g in groups for c in g] if vllm_mode(trainer.args) else None
        return out


def sharding(accelerator: Any) -> str:
    """The world's weight layout in ``check_tracer_world``'s terms: ``DEEPSPEED_ZERO3``, ``FSDP``,
    or accelerate's distributed type (``NO``, ``MULTI_GPU``, ``MULTI_CPU``, ``DEEPSPEED``)."""
    kind = accelerator.distributed_type.value
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    return "DEEPSPEED_ZERO3" if kind == "DEEPSPEED" and plugin and plugin.zero_stage == 3 else kind
