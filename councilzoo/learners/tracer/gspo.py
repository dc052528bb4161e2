"""TRACER's utterance layer on TRL's ``GRPOTrainer``: one generation round is one TRACER step.

The trainer's ``rollout_func`` hook (TRL calls it at generation time, with the current policy)
runs the step: it plays the step's ``review-v0`` episodes through the rollout engine with the
regret-matching controllers choosing modes, branches them for counterfactual values, updates
the controllers, then picks ``turns_per_step`` of the step's speaking turns (REFRESH / SPEAK
with a label) and samples ``num_candidates`` continuations of each turn's own prompt. Those
groups are the trainer's batch; ``UtteranceReward`` scores them by role against the episode's
label (gold, or the label-free consensus of the step's proposals):

- proposer: +1 if its answer is the label, -1 if wrong or unreadable;
- reviewer: +1 if its verdict matches the pending answer's correctness, -1 if not, 0 if none;
- both: minus ``cost_penalty * completion_tokens / max_new_tokens`` (optional).

TRL then takes the GSPO step (``importance_sampling_level="sequence", loss_type="grpo"`` unless
the config's ``generation.trainer`` says otherwise), with LoRA through ``generation.peft``.
Turns are resampled (with replacement, seeded) when a step has fewer than ``turns_per_step``, and
subsampled when it has more. The release updated before each real utterance; here the episodes
of a step are played by the policy of the previous step, and the update follows the batch.

One trainer trains one model: the shared model with role prompts (default), or, with separate
role models, the proposer's (the reviewer's model then only generates).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from councilzoo.agents.base import Sampling
from councilzoo.agents.factory import ModelSpec, build_model, import_object
from councilzoo.agents.llm import LLMAgent
from councilzoo.agents.parsing import parse_action
from councilzoo.envs.core import Mode
from councilzoo.learners.cohort import engine
from councilzoo.learners.live_policy import push_weights, trainer_vllm_generator, vllm_mode
from councilzoo.learners.tracer.config import ROLES, TracerConfig
from councilzoo.tasks import answers_equivalent

__all__ = ["UtteranceLayer"]

STEP_PROMPT = [{"role": "user", "content": "tracer step"}]  # dataset placeholder; rollout_func plays


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
                value = 0.0 if action.verdict is None else (1.0 if right else -1.0)
            out.append(value - self.cost_penalty * len(ids) / self.max_new_tokens)
        return out


class UtteranceLayer:
    """The trained model, its ``GRPOTrainer``, and the LLM agents that play with it.

    ``callbacks`` are trainer callbacks that save into each checkpoint (TRACER's controllers), so
    the checkpoint's manifest covers them."""

    def __init__(self, cfg: TracerConfig, play_step: Any, callbacks: Sequence[Any] = ()) -> None:
        from transformers import AutoModelForCausalLM

        from councilzoo.agents.generators.common import resolve_model_path
        from councilzoo.agents.generators.transformers_backend import TransformersGenerator

        a, g = cfg.agents, cfg.generation
        self.cfg, self.play_step = cfg, play_step
        self.sampling = Sampling(
            max_new_tokens=a.max_new_tokens, temperature=a.temperature, stop=tuple(a.stop)
        )
        path = resolve_model_path(a.model)
        self.shared = a.share_model and "reviewer" not in a.models
        self.trained_roles = ROLES if self.shared else ("proposer",)
        args = engine.grpo_args(
            output_dir=cfg.output_dir,
            max_steps=cfg.max_steps,
            seed=cfg.seed,
            save_steps=cfg.save_steps,
            report_to=cfg.report_to,
            num_generations=g.num_candidates,
            prompts_per_round=g.turns_per_step,
            max_completion_length=a.max_new_tokens,
            run_name=f"tracer-{cfg.seed}",
            overrides={"temperature": a.temperature, "save_total_limit": cfg.save_total_limit, **g.trainer},
        )
        self.trainer = engine.build_trainer(
            AutoModelForCausalLM.from_pretrained(path),
            path,
            args,
            [
                {"prompt": STEP_PROMPT, "slot": i}
                for i in range(engine.rounds_needed(args) * g.turns_per_step)
            ],
            [UtteranceReward(g.cost_penalty, a.max_new_tokens)],
            callbacks,
            peft=g.peft,
            rollout_func=self.rollout,
        )
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
            if "reviewer" not in a.models:  # a frozen copy of the base model (else built by role_agents)
                frozen = {"model": path, "device": a.device, "seed": cfg.seed}
                spec = ModelSpec("transformers", frozen, agent=options)
                self.agents["reviewer"] = build_model("reviewer", spec)
        self._turns: list = []

    def sync(self) -> None:
        """Make the generator play the trainer's current weights: a no-op with transformers (it
        generates with the trained model), a weight push into vLLM when it changed since the last."""
        if vllm_mode(self.trainer.args):
            push_weights(self.trainer, self.generator)

    # -- the episodes' hook: remember every speaking turn ---------------------------------------
    def collect(self, episode: int, context, mode: Mode) -> None:
        self._turns.append((episode, context, Mode(mode)))

    def start_step(self) -> None:
        self._turns = []

    # -- TRL's rollout_func -------------------------------------------------------------------
    def rollout(self, prompts: list, trainer: Any) -> dict[str, list]:
        """One TRACER step, then G candidates of each chosen speaking turn (group after group)."""
        g = self.cfg.generation
        if len(prompts) != g.turns_per_step * g.num_candidates:
            raise RuntimeError(
                f"expected {g.turns_per_step} x {g.num_candidates} prompts, got {len(prompts)}"
            )
        while True:
            problems, labels, metrics = self.play_step()
            turns = [t for t in self._turns if t[1].role in self.trained_roles and labels[t[0]] is not None]
            if turns:
                break  # else a step with nothing to train: play the next one
        rng = np.random.default_rng([self.cfg.seed, metrics["step"], 17])
        picked = rng.choice(len(turns), size=g.turns_per_step, replace=len(turns) < g.turns_per_step)
        chosen = [turns[k] for k in np.sort(picked)]
        agent = self.agents.get("proposer", self.agents.get("*"))
        requests = agent.plan([replace(ctx, legal_modes=(mode,)) for _, ctx, mode in chosen])
        groups = self.generator.generate(
            [r.messages for r in requests],
            n=g.num_candidates,
            sampling=replace(self.sampling, seed=int(rng.integers(2**31))),
        )
        out: dict[str, list] = {
            k: [] for k in ("prompt_ids", "completion_ids", "role", "mode", "kind", "label", "pending")
        }
        for (episode, ctx, mode), group in zip(chosen, groups, strict=True):
            for c in group:
                out["prompt_ids"].append(list(c.prompt_token_ids))
                out["completion_ids"].append(list(c.token_ids))
                out["role"].append(ctx.role)
                out["mode"].append(int(mode))
                out["kind"].append(ctx.problem.kind)
                out["label"].append(labels[episode])
                out["pending"].append(ctx.extras.get("pending_answer") or "")
        # vLLM's sampled-token log-probabilities feed TRL's importance-sampling correction; with
        # transformers TRL scores the old policy itself
        out["logprobs"] = [c.logprobs for g in groups for c in g] if vllm_mode(trainer.args) else None
        return out
