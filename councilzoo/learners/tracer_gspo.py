"""TRACER's generation layer: G candidates per speaking turn, role rewards, one GSPO step per model.

During a step's episodes every REFRESH / SPEAK turn is collected (its context and mode). After the
episodes, each collected turn's prompt (the same rendering the agent used) is sampled
``num_candidates`` times in one ``generate`` call per model, and each candidate is rewarded
against the episode's label (gold, or the label-free consensus):

- proposer: +1 if its answer is the label, -1 if wrong or unreadable;
- reviewer: +1 if its verdict matches the pending answer's correctness, -1 if not, 0 if none;
- both: minus ``cost_penalty * completion_tokens / max_new_tokens`` (optional).

Then one GSPO step (``councilzoo.learners.policy_update.PolicyUpdater``) per model: one shared
model with role prompts takes both roles' groups in one step; separate models one step each.
The release updated before generating each real utterance, one turn at a time; here the update
follows the batch (same groups and rewards, batched generation), so the episodes of a step are
played by the policy of the previous step. Turns whose episode has no label train nothing.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from councilzoo.agents.base import Sampling
from councilzoo.agents.llm import LLMAgent
from councilzoo.agents.parsing import parse_action
from councilzoo.envs.core import Mode, TurnContext
from councilzoo.learners.policy_update import PolicyUpdater, RolloutBatch
from councilzoo.learners.tracer_config import TracerConfig
from councilzoo.tasks import Problem, answers_equivalent

ROLES = ("proposer", "reviewer")


class GenerationLayer:
    """LLM agents for review-v0 plus their GSPO training (see the module docstring)."""

    def __init__(self, cfg: TracerConfig) -> None:
        from councilzoo.agents.generators.transformers_backend import TransformersGenerator

        a, g = cfg.agents, cfg.generation
        self.cfg = cfg
        self.sampling = Sampling(
            max_new_tokens=a.max_new_tokens, temperature=a.temperature, stop=tuple(a.stop)
        )
        load = dict(device=a.device, dtype=a.dtype, seed=cfg.seed)
        proposer = TransformersGenerator(a.model, **load)
        self.shared = a.share_model and a.reviewer_model is None
        reviewer = proposer if self.shared else TransformersGenerator(a.reviewer_model or a.model, **load)
        self.generators = {"proposer": proposer, "reviewer": reviewer}
        # One updater per distinct model, named "shared" or by role.
        names = {"shared": proposer} if self.shared else self.generators
        self.updaters: dict[str, PolicyUpdater] = {}
        if g.enabled:
            for name, gen in names.items():
                self.updaters[name] = PolicyUpdater(gen.model, g.policy, num_training_steps=cfg.steps)
                gen.model = self.updaters[name].model  # LoRA wraps the model: generate with the wrapper
        if self.shared:
            self.agents = {"*": LLMAgent(proposer, sampling=self.sampling, name="tracer")}
        else:
            self.agents = {
                role: LLMAgent(self.generators[role], sampling=self.sampling, name=role) for role in ROLES
            }
        self._turns: list[tuple[int, TurnContext, Mode]] = []
        self._groups: dict[str, tuple[list, list, list]] = {}
        self._step = 0

    # ---- collection and sampling -------------------------------------------------------------
    def start_step(self, step: int) -> None:
        self._turns, self._groups, self._step = [], {}, step

    def collect(self, episode: int, context: TurnContext, mode: Mode) -> None:
        """``on_speak`` hook of ``play_episodes``: remember a speaking turn."""
        self._turns.append((episode, context, Mode(mode)))

    def sample(self, problems: list[Problem]) -> dict[str, list[str | None]]:
        """Sample G candidates for every collected turn; return the proposers' candidate answers per
        problem id (votes for the label-free consensus)."""
        g, cap = self.cfg.generation, self.cfg.generation.max_turns_per_role
        rng = np.random.default_rng([self.cfg.seed, self._step, 17])
        seed = int(rng.integers(2**31))
        votes: dict[str, list[str | None]] = {}
        for role in ROLES:
            turns = [t for t in self._turns if t[1].role == role]
            if cap is not None and len(turns) > cap:
                turns = [turns[k] for k in np.sort(rng.choice(len(turns), size=cap, replace=False))]
            if not turns:
                continue
            agent = self.agents.get(role, self.agents.get("*"))
            requests = agent.plan([replace(ctx, legal_modes=(mode,)) for _, ctx, mode in turns])
            prompts = [r.messages for r in requests]
            completions = self.generators[role].generate(
                prompts, n=g.num_candidates, sampling=replace(self.sampling, seed=seed)
            )
            parsed = [
                [parse_action(c.text, role, ctx.problem.kind, mode=mode) for c in group]
                for (_, ctx, mode), group in zip(turns, completions, strict=True)
            ]
            self._groups[role] = (turns, completions, parsed)
            if role == "proposer":
                for (i, _, _), actions in zip(turns, parsed, strict=True):
                    votes.setdefault(problems[i].id, []).extend(a.answer for a in actions)
        return votes

    # ---- rewards and update ------------------------------------------------------------------
    def rewards(self, role: str, labels: list[str | None]) -> tuple[list[int], torch.Tensor]:
        """(indices of the labelled turns, their candidates' rewards flattened group after group)."""
        turns, completions, parsed = self._groups[role]
        keep, rewards = [], []
        max_new = self.cfg.agents.max_new_tokens
        for k, ((i, ctx, _), group, actions) in enumerate(zip(turns, completions, parsed, strict=True)):
            label, kind = labels[i], ctx.problem.kind
            if label is None:
                continue
            keep.append(k)
            pending_ok = answers_equivalent(ctx.extras.get("pending_answer"), label, kind)
            for c, action in zip(group, actions, strict=True):
                if role == "proposer":
                    r = 1.0 if answers_equivalent(action.answer, label, kind) else -1.0
                else:
                    right = (action.verdict == "RIGHT") == pending_ok
                    r = 0.0 if action.verdict is None else (1.0 if right else -1.0)
                rewards.append(r - self.cfg.generation.cost_penalty * c.completion_tokens / max_new)
        return keep, torch.tensor(rewards, dtype=torch.float32)

    def update(self, problems: list[Problem], labels: list[str | None]) -> dict[str, dict[str, float]]:
        """One GSPO step per model on this step's candidates; returns per-model stats."""
        per_model: dict[str, tuple[list, list]] = {}
        for role in self._groups:
            keep, rewards = self.rewards(role, labels)
            if not keep:
                continue
            groups = [self._groups[role][1][k] for k in keep]
            entry = per_model.setdefault("shared" if self.shared else role, ([], []))
            entry[0].extend(groups)
            entry[1].append(rewards)
        stats = {}
        for name, (groups, rewards) in per_model.items():
            pad = self.generators["proposer" if name == "shared" else name].tokenizer.pad_token_id
            batch = RolloutBatch.from_completions(groups, pad)
            flat = torch.cat(rewards)
            stats[name] = {
                **self.updaters[name].step(batch, flat),
                "reward_mean": float(flat.mean()),
                "groups": len(groups),
            }
        return stats

    # ---- checkpoints -------------------------------------------------------------------------
    def models(self) -> dict[str, torch.nn.Module]:
        return {name: u.model for name, u in self.updaters.items()}

    def optimizer_states(self) -> dict[str, dict[str, object]]:
        return {
            name: {"optimizer": u.optimizer, "scheduler": u.scheduler} for name, u in self.updaters.items()
        }
