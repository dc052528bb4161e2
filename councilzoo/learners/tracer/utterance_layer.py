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

Who trains: one trainer trains the shared model with role prompts (default), or, with separate
role models, the proposer's (the reviewer's model then only generates: a frozen copy of the base,
or with ``agents.shared_base`` the proposer's own base with its adapter switched off). With
``agents.train_reviewer`` each role has a trainer of its own (its own optimizer, schedule,
checkpoints, metrics), on a model each or, with ``agents.shared_base``, on a LoRA adapter each of
one base: the trainers take turns in this process and the step, played once in the proposer's
trainer's ``rollout_func``, gives each its role's turns (``learners/shared_base.py``:
``AdapterTurns``, ``SharedRounds``).

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
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo.agents.base import Sampling
from councilzoo.agents.factory import ModelSpec, build_model, import_object
from councilzoo.agents.llm import LLMAgent
from councilzoo.agents.parsing import parse_action
from councilzoo.config import ConfigError
from councilzoo.envs.types import Mode
from councilzoo.learners import engine
from councilzoo.learners.live_policy import push_weights, trainer_vllm_generator, vllm_mode
from councilzoo.learners.recipe_checks import check_tracer_world
from councilzoo.learners.shared_base import AdapterTurns, SharedRounds, load_shared_base, run_threads
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
    """The trained models, their ``GRPOTrainer``s (``trainer``: the lead, whose folder is the
    run's), and the LLM agents that play with them.

    ``callbacks`` are trainer callbacks that save into each checkpoint (TRACER's controllers), so
    the checkpoint's manifest covers them; ``settings`` are the trainer's ``GRPOConfig`` arguments
    as the placement plan decided them (default: ``utterance_args`` for this process's world)."""

    def __init__(
        self, cfg: TracerConfig, play_step: Any, callbacks: Sequence[Any] = (),
        settings: Mapping[str, Any] | None = None,
    ) -> None:
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
        # each trainer (by name) and the roles whose turns it trains on
        if self.shared:
            self.trainer_roles = {"*": ROLES}
        else:
            self.trainer_roles = {role: (role,) for role in (ROLES if a.train_reviewer else ("proposer",))}
        self.trained_roles = tuple(r for roles in self.trainer_roles.values() for r in roles)
        args = utterance_args(cfg) if settings is None else engine.grpo_config(settings, f"tracer-{cfg.seed}")
        if a.train_reviewer:
            self.trainers = self._role_trainers(path, args, callbacks)
        else:
            self.trainers = {
                next(iter(self.trainer_roles)): engine.build_trainer(
                    _load_model(path), path, args, _rows(cfg, args), [_reward(cfg)], callbacks, peft=g.peft,
                    rollout_func=self.rollout,
                )
            }
        self.trainer = next(iter(self.trainers.values()))  # the lead: the run's folder, rows, controllers
        check_tracer_world(sharding(self.trainer.accelerator), self.trainer.accelerator.num_processes)
        tokenizer = self.trainer.processing_class
        if vllm_mode(self.trainer.args):  # TRL's colocated engine or its server plays and samples; sync()
            generators = {name: trainer_vllm_generator(trainer) for name, trainer in self.trainers.items()}
        elif a.train_reviewer and a.shared_base:  # a generator per adapter: a generate call per role
            model = self.turn_taking.model
            generators = {role: AdapterGenerator(model, {}, tokenizer=tokenizer, seed=cfg.seed).seat(role)
                          for role in ROLES}  # fmt: skip
        else:  # each trainer's model itself, trained in place
            generators = {
                name: TransformersGenerator(trainer.model, tokenizer=tokenizer, seed=cfg.seed)
                for name, trainer in self.trainers.items()
            }
        self.generator = generators[next(iter(self.trainers))]
        options = {"sampling": self.sampling, "render": import_object(a.render) if a.render else None}
        self.agents = {name: LLMAgent(generator, name="tracer" if name == "*" else name, **options)
                       for name, generator in generators.items()}  # fmt: skip
        frozen_reviewer = not (self.shared or a.train_reviewer)  # the reviewer only generates
        if frozen_reviewer and a.shared_base:  # the base under the proposer's adapter, the adapter off
            base = AdapterGenerator(self.trainer.model, {}, tokenizer=tokenizer, seed=cfg.seed)
            self.agents["reviewer"] = LLMAgent(base.seat(BASE), name="reviewer", **options)
        elif frozen_reviewer and "reviewer" not in a.models:  # a frozen copy (else built by role_agents)
            frozen = {"model": path, "device": a.device, "seed": cfg.seed}
            spec = ModelSpec("transformers", frozen, agent=options)
            self.agents["reviewer"] = build_model("reviewer", spec)
        # the step's speaking turns and decisions to stay silent (episode, context, mode), set by the learner
        self.turns: list = []
        self.silent: list = []

    def _role_trainers(self, path: str, args: Any, callbacks: Sequence[Any]) -> dict[str, Any]:
        """``agents.train_reviewer``: a trainer per role, taking turns in this process
        (``learners/shared_base.py``), each on its role's part of the one played step
        (``SharedRounds``): on one base with a LoRA adapter each (``agents.shared_base``), or on a
        model each. The proposer's ``GRPOConfig`` is ``args``; the reviewer's is ``utterance_args`` in
        its folder ``output_dir/reviewer/``."""
        cfg, g = self.cfg, self.cfg.generation
        if engine.current_world_size() > 1:
            raise ConfigError("agents.train_reviewer: the role trainers take turns in one process; "
                              "num_processes must be 1")
        base = None
        if cfg.agents.shared_base:
            base = load_shared_base(path, dict.fromkeys(ROLES, g.peft), cfg.seed)
        self.turn_taking = AdapterTurns(base)
        self.rounds = SharedRounds(self.turn_taking, ROLES, self.play_rounds)
        self._taken = dict.fromkeys(ROLES, 0)
        reviewer_dir = Path(cfg.output_dir) / "reviewer"
        role_callbacks = {
            "proposer": callbacks, "reviewer": [engine.MetricsFile(reviewer_dir / "metrics.jsonl")]
        }
        trainers = {}
        for role in ROLES:
            if role == "reviewer":
                args = utterance_args(replace(cfg, output_dir=str(reviewer_dir)))
            common = (path, args, _rows(cfg, args), [_reward(cfg)], role_callbacks[role])
            rollout = partial(self.role_rollout, role)
            if base is None:
                model = _load_model(path)
                trainers[role] = engine.build_trainer(model, *common, peft=g.peft, rollout_func=rollout)
            else:
                base.set_adapter(role)
                trainers[role] = engine.build_trainer(base, *common, rollout_func=rollout, adapter=role)
            self.turn_taking.save_rng(role)
        return trainers

    def train(self, resume_from: str | Path | None = None) -> None:
        """Train (from TRL checkpoint ``resume_from``, the lead's: every trainer resumes from its
        checkpoint of the same step) and save each trainer's final model in its ``final/``."""
        def run(trainer: Any) -> None:
            folder = Path(trainer.args.output_dir)
            checkpoint = str(folder / Path(resume_from).name) if resume_from else None
            trainer.train(resume_from_checkpoint=checkpoint)
            trainer.save_model(str(folder / "final"))  # adapters: adapter_config.json + weights

        if len(self.trainers) == 1:
            run(self.trainer)
            return

        def in_turn(name: str, trainer: Any) -> None:
            with self.turn_taking.turn(name):
                run(trainer)

        run_threads({name: partial(in_turn, name, t) for name, t in self.trainers.items()}, self.rounds.fail)

    def latest_checkpoint(self) -> Path | None:
        """The lead's newest TRL checkpoint of a step every trainer holds (None if there is none)."""
        held = [set(engine.checkpoint_steps(t.args.output_dir)) for t in self.trainers.values()]
        steps = set.intersection(*held)
        return Path(self.trainer.args.output_dir) / f"checkpoint-{max(steps)}" if steps else None

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

    def role_rollout(self, role: str, prompts: list, trainer: Any) -> dict[str, list]:
        """``agents.train_reviewer``: role ``role``'s trainer's ``rollout_func``: its part of the
        step played once for both roles (``SharedRounds``: the proposer's trainer plays it)."""
        k, self._taken[role] = self._taken[role], self._taken[role] + 1
        part = self.rounds.take(role, k)
        if len(part["prompt_ids"]) != len(prompts):
            raise RuntimeError(f"{role}: expected {len(prompts)} candidates, got {len(part['prompt_ids'])}")
        return part

    def play_and_sample(self, trainer: Any) -> dict[str, list]:
        """One TRACER step (every rank plays its share and learns from the whole), then this rank's
        share of the round (``play_rounds``)."""
        return self.play_rounds(with_logprobs=bool(vllm_mode(trainer.args)))[next(iter(self.trainers))]

    def play_rounds(self, with_logprobs: bool = False) -> dict[str, dict[str, list]]:
        """One TRACER step (played again while a trainer has no turn of its roles to train on),
        then each trainer's round (this rank's share, ``_sample``): G candidates of each of its
        chosen speaking turns. A role trainer (``agents.train_reviewer``) whose role spoke in none
        of the step's turns trains on the role's decisions to stay silent, made to speak (the turns
        their branches play), so a reviewer that learned to skip still gets its update."""
        while True:
            problems, labels, metrics = self.play_step()
            by_trainer = self.trainer_roles
            turns = {name: self._trainable(self.turns, roles, labels) for name, roles in by_trainer.items()}
            if len(turns) > 1:  # a role trainer whose role never spoke: its decisions to stay silent
                turns = {name: found or self._trainable(self.silent, by_trainer[name], labels)
                         for name, found in turns.items()}  # fmt: skip
            if all(turns.values()):
                break  # else a step with nothing to train: play the next one
        seed = [self.cfg.seed, metrics["step"], 17]  # the first trainer's draw; the others' add their index
        return {
            name: self._sample(name, turns[name], labels, seed + [k] * (k > 0), with_logprobs)
            for k, name in enumerate(turns)
        }

    def _trainable(self, turns: list, roles: Sequence[str], labels: Sequence[str | None]) -> list:
        """The ``turns`` of ``roles`` that have a label to be scored against."""
        return [t for t in turns
                if t[1].role in roles and (labels[t[0]] is not None or self._leave_one_out(t[1].role))]

    def _sample(
        self, name: str, turns: list, labels: Sequence[str | None], seed: list[int], with_logprobs: bool
    ) -> dict[str, list]:
        """This rank's share of trainer ``name``'s round: G candidates of each of its chosen turns,
        sampled by the agent playing its role. Every rank draws the same ``turns_per_step`` of
        ``turns`` (by ``seed``); rank r samples turns ``r k .. (r + 1) k - 1`` of them (k =
        turns_per_step / world), which is TRL's own split of a round (rank-major, whole groups),
        with a sampling seed of its own."""
        g, acc = self.cfg.generation, self.trainer.accelerator
        rng = np.random.default_rng(seed)
        picked = rng.choice(len(turns), size=g.turns_per_step, replace=len(turns) < g.turns_per_step)
        share = g.turns_per_step // acc.num_processes
        first = acc.process_index * share
        chosen = [turns[k] for k in np.sort(picked)][first:first + share]
        draw = int(rng.integers(2**31))
        if acc.process_index:  # the other ranks' draws independent of rank 0's
            draw = int(np.random.default_rng([draw, acc.process_index]).integers(2**31))
        agent = self.agents[name]
        requests = agent.plan([replace(ctx, legal_modes=(mode,)) for _, ctx, mode in chosen])
        groups = agent.generator.generate(
            [r.messages for r in requests], n=g.num_candidates, sampling=replace(self.sampling, seed=draw)
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
        out["logprobs"] = [c.logprobs for g in groups for c in g] if with_logprobs else None
        return out


def _load_model(path: str) -> Any:
    """The model at ``path`` in fp32 master weights whatever the checkpoint's dtype (transformers 5
    would load a bf16 checkpoint in bf16, and pure-bf16 AdamW loses most updates); ``bf16: true``
    autocasts."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


def _rows(cfg: TracerConfig, args: Any) -> list[dict]:
    """The trainer's dataset: placeholders, one per prompt of every round (``rollout_func`` plays)."""
    count = engine.rounds_needed(args) * cfg.generation.turns_per_step
    return [{"prompt": _STEP_PROMPT, "slot": i} for i in range(count)]


def _reward(cfg: TracerConfig) -> UtteranceReward:
    return UtteranceReward(cfg.generation.cost_penalty, cfg.agents.max_new_tokens)


def sharding(accelerator: Any) -> str:
    """The world's weight layout in ``check_tracer_world``'s terms: ``DEEPSPEED_ZERO3``, ``FSDP``,
    or accelerate's distributed type (``NO``, ``MULTI_GPU``, ``MULTI_CPU``, ``DEEPSPEED``)."""
    kind = accelerator.distributed_type.value
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    return "DEEPSPEED_ZERO3" if kind == "DEEPSPEED" and plugin and plugin.zero_stage == 3 else kind
