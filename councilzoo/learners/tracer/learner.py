"""TRACER: turn-level RL for cooperative multi-LLM reasoning, on ``councilzoo/review-v0``.

Two layers (docs/tracer.md), each step:

1. **Controller layer.** Proposers choose KEEP/REFRESH and reviewers SKIP/SPEAK by regret
   matching (``RegretMatchingController``: one ``councilzoo.theory.RegretMatcher`` per role over
   information states; RM+ by default). Each decision gets action values for both modes
   (``tracer/controller_layer.py``: counterfactual rollouts by default, or the released myopic scores); the
   (state, values) pairs of the whole batch update each role's matcher in one call.
2. **Utterance layer** (LLM agents, ``generation.enabled``), on TRL's ``GRPOTrainer``
   (``learners/tracer/utterance_layer.py``): each generation round of the trainer is one TRACER step, played
   inside its ``rollout_func``; G candidates of the step's speaking turns are rewarded by role
   (proposer: +1 right answer, -1 wrong or none; reviewer: +1 verdict matches the pending answer's
   correctness, -1 not or none; minus an optional length cost) and TRL takes the GSPO step.

Label-free variant (``label_free: true``): every gold-based value and reward is judged against a
peer-consensus label instead: the plurality of all proposals made for the problem in the step's
episodes (``consensus_votes: proposals_and_reviews``: and of the answers the reviewers state when
they speak). Those votes exist only where the controllers chose to propose or speak, so the label
confirms the controllers' own choices (an arm collapsed to never reviewing).
``consensus_votes: samples`` removes that loop: the label is the plurality of
``consensus_samples`` fresh opening proposals per problem, drawn outside the episodes
(``sampled_consensus``), and each GSPO proposer candidate is scored against the plurality of the
*other* candidates of its group (``gspo.leave_one_out_labels``), so no sample votes for itself. Gold
is then only read to report evaluation accuracy. See docs/tracer.md for what changes.

Update semantics: per visit (default), each decision is one regret-matching iteration, applied in
batch order, so a state's T is its number of decisions; ``batch_mean`` averages a state's action
values over the batch and applies one iteration per state per step (T = steps that visited it).
Either way the bound ``regret <= Delta sqrt(2 T)`` holds per state with its own T.
"""

from __future__ import annotations

import heapq
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo.agents.base import Agent
from councilzoo.agents.controllers import Controller, FixedController, RandomController
from councilzoo.agents.controllers.regret_matching import RegretMatchingController, VoteTimeState
from councilzoo.agents.factory import ModelSpec, build_models
from councilzoo.config import ConfigError, write_run_files
from councilzoo.envs import review_v0
from councilzoo.envs.types import Mode
from councilzoo.learners.base import Learner, register_learner
from councilzoo.learners.checkpoint import (
    TRAINER_CHECKPOINT_RE,
    check_checkpoint_folder,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from councilzoo.learners.data import load_items
from councilzoo.learners.engine import StepProgress, checkpoint_steps, leave_world
from councilzoo.learners.logging import MetricsLogger, read_metrics
from councilzoo.learners.placement import Machines, Placement, World, plan_tracer
from councilzoo.learners.tracer.config import ROLES, TracerConfig
from councilzoo.learners.tracer.controller_layer import Decision, Player, action_values, branch, play_episodes
from councilzoo.learners.tracer.metrics import episode_metrics, flatten, regret_summary, speak_rates
from councilzoo.progress import Progress
from councilzoo.rollout import RolloutEngine
from councilzoo.tasks import Problem, answers_equivalent, extract_answer, load_problems, plurality

__all__ = [
    "baseline_controllers", "consensus_labels", "role_agents", "StepShare", "merge_shares", "Tracer",
    "ControllerCheckpoints", "TracerLearner", "run_world",
]

FRESH_EPISODES = 1_000_000  # episode numbers of the label-free fresh proposals (no real episode's)


def _callback_base() -> type:
    from transformers import TrainerCallback

    return TrainerCallback


def baseline_controllers(names: Sequence[str], seed: int) -> dict[str, Controller]:
    """The fixed protocols TRACER is compared with, on the same env and agents.

    ``always_speak``: proposers REFRESH, reviewers SPEAK (TRACER without a controller);
    ``never_review``: reviewers SKIP, proposers KEEP (one proposal, one call);
    ``alternate``: reviewers speak in every other review round (rounds 2, 6, ...), proposers
    REFRESH after a review round that spoke and KEEP otherwise; ``random``: speak w.p. 1/2.
    """
    # FixedController cycles a tuple by ``round % len``: with period 4, review rounds 2, 6, ..
    # hit index 2 and rounds 4, 8, .. index 0; propose rounds 3, 7 index 3 and 5, 9 index 1.
    table = {
        "always_speak": lambda: FixedController({"proposer": Mode.REFRESH, "reviewer": Mode.SPEAK}),
        "never_review": lambda: FixedController({"proposer": Mode.KEEP, "reviewer": Mode.SKIP}),
        "alternate": lambda: FixedController(
            {
                "reviewer": (Mode.SKIP, Mode.SKIP, Mode.SPEAK, Mode.SKIP),
                "proposer": (Mode.KEEP, Mode.KEEP, Mode.KEEP, Mode.REFRESH),
            }
        ),
        "random": lambda: RandomController(0.5, seed=seed),
    }
    return {name: table[name]() for name in names}


def consensus_labels(
    problems: Sequence[Problem],
    records: Sequence,
    extra_answers: Mapping[str, list[str | None]] | None = None,
    with_reviews: bool = False,
) -> list[str | None]:
    """Label-free labels, one per episode: the plurality of every proposal made for its problem
    in the step (all its episodes' REFRESH answers plus ``extra_answers[problem id]``; with
    ``with_reviews`` also the answer stated in each reviewer's SPEAK turn, one vote per turn, so
    a reviewer that re-solves votes with what it found); None when nothing parses."""
    votes: dict[str, list[str | None]] = {}
    for problem, record in zip(problems, records, strict=True):
        votes.setdefault(problem.id, list((extra_answers or {}).get(problem.id, [])))
        votes[problem.id].extend(record.info.get("proposals", []))
        if with_reviews:
            votes[problem.id].extend(extract_answer(t.text, problem.kind) for t in record.turns
                                     if t.role == "reviewer" and t.mode is Mode.SPEAK)
    labels = {p.id: plurality(votes[p.id], p.kind)[0] for p in problems}
    return [labels[p.id] for p in problems]


def role_agents(cfg: TracerConfig, trained: Mapping[str, Agent] | None = None) -> dict[str, Agent]:
    """Who plays each role, built by the one agent factory (``agents.factory``): the ``trained``
    LLM agents of the utterance layer, else one SimulatedAgent per role from
    ``agents.simulated`` (seeded by the run seed); ``agents.models`` replaces either per role."""
    unknown = set(cfg.agents.simulated) - set(ROLES)
    if unknown:
        raise ValueError(f"agents.simulated has roles {sorted(unknown)}; expected 'proposer' and 'reviewer'")
    if trained is None:
        given = cfg.agents.simulated
        trained = build_models(
            {r: ModelSpec("simulated", {"skill": 0.6, **given.get(r, {}), "seed": cfg.seed}) for r in ROLES}
        )
    return {**trained, **build_models(cfg.agents.models)}


@dataclass
class StepShare:
    """What one process played of a step: its episodes' records and labels, its decisions (episodes
    numbered in the step, branches dropped) with their action values, its speaking turns
    ``(episode, context, mode)``, its decisions to stay silent (the same, with the speaking mode
    passed over), and its engine's sampling-seed counter after playing."""

    records: list
    labels: list
    decisions: list[Decision]
    values: np.ndarray
    valid: np.ndarray
    turns: list
    silent: list
    calls: int


def merge_shares(shares: Sequence[StepShare]) -> StepShare:
    """The whole step from its processes' shares (in rank order: blocks of consecutive episodes),
    decisions, turns and silent decisions in the order one process plays them: the lockstep loop
    plays every live episode's next turn each tick, so by (turn's position in its episode, episode)."""
    if len(shares) == 1:
        return shares[0]
    decisions = heapq.merge(*[zip(s.decisions, s.values, s.valid, strict=True) for s in shares],
                            key=lambda row: (row[0].turn_index, row[0].episode))  # fmt: skip
    decided = list(decisions)

    def in_play_order(parts: Sequence[list]) -> list:
        return list(heapq.merge(*parts, key=lambda t: (len(t[1].transcript), t[0])))

    return StepShare(
        records=[r for s in shares for r in s.records], labels=[x for s in shares for x in s.labels],
        decisions=[d for d, _, _ in decided], values=np.array([v for _, v, _ in decided]).reshape(-1, 2),
        valid=np.array([ok for _, _, ok in decided], bool),
        turns=in_play_order([s.turns for s in shares]), silent=in_play_order([s.silent for s in shares]),
        calls=max(s.calls for s in shares),
    )  # fmt: skip


class Tracer:
    """TRACER's learner (see the module docstring). ``step()`` runs one training step.

    ``agents`` (role or agent name -> Agent) overrides the configured agents; ``train_problems``
    and ``eval_sets`` (name -> problems) override the configured data.
    """

    def __init__(
        self,
        cfg: TracerConfig,
        *,
        agents: Mapping[str, object] | None = None,
        train_problems: Sequence[Problem] | None = None,
        eval_sets: Mapping[str, Sequence[Problem]] | None = None,
        trainer_settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.cfg = cfg
        data = cfg.data
        self.train_problems = (
            list(train_problems)
            if train_problems is not None
            else load_items(data, cfg.seed)
        )
        if not self.train_problems:
            raise ValueError("the training set is empty")
        self.eval_sets = (
            {k: list(v) for k, v in eval_sets.items()}
            if eval_sets is not None
            else {
                name: load_problems(name, data.eval_split, seed=cfg.seed, limit=data.eval_limit,
                                    size=data.num_problems, difficulty=data.difficulty)
                for name in data.eval
            }
        )
        c = cfg.controller
        self.state_fn = VoteTimeState(
            max_abs_score=c.max_abs_score, with_round=c.with_round, rounds=cfg.env.rounds
        )
        self.controller = RegretMatchingController(
            self.state_fn,
            variant=c.variant,
            averaging=c.averaging,
            exploration=c.exploration,
            eval_play=c.eval_play,
            untrained=c.untrained,
            seed=cfg.seed,
        )
        self.generation = None
        if cfg.agents.kind == "llm":
            from councilzoo.learners.tracer.utterance_layer import UtteranceLayer

            callbacks = [ControllerCheckpoints(self), _UpdateMetrics(self), StepProgress("tracer")]
            self.generation = UtteranceLayer(cfg, self.play_step, callbacks, trainer_settings)
        if agents is None:
            agents = role_agents(cfg, self.generation.agents if self.generation else None)
        self._envs: list = []
        rank, _ = self.world()
        seed = cfg.seed if rank == 0 else int(np.random.default_rng([cfg.seed, rank]).integers(2**31))
        # The engine's own env is never played: episodes run on this learner's pool and snapshots.
        self.engine = RolloutEngine(self._new_env, agents, num_envs=1, seed=seed, progress=False)
        self.player = Player(self.engine, self.controller)
        self.step_count = 0
        self.out_dir = Path(cfg.output_dir)
        self.logger: MetricsLogger | None = None
        self.history: list[dict] = []
        self._row: tuple[int, dict[str, float]] | None = None  # the step's metrics, until logged

    # ---- episodes ----------------------------------------------------------------------------
    def _new_env(self):
        e = self.cfg.env
        return review_v0.raw_env(
            num_agents=e.num_agents,
            rounds=e.rounds,
            final_rule=e.final_rule,
            lam=e.lam,
            cost_unit=e.cost_unit,
            problems=self.train_problems[:1],
        )

    def _env_pool(self, n: int) -> list:
        while len(self._envs) < n:
            env = self._new_env()
            env.env_index = len(self._envs)
            self._envs.append(env)
        return self._envs[:n]

    def _reset(self, problems: Sequence[Problem]) -> list:
        envs = self._env_pool(len(problems))
        for env, problem in zip(envs, problems, strict=True):
            env.reset(options={"problem": problem})
        return envs

    def batch(self, step: int) -> tuple[list[Problem], list[int]]:
        """Step ``step``'s problems (one entry per episode) and episode indices; a pure function of
        (seed, step), so a resumed run sees the same batches."""
        rng = np.random.default_rng([self.cfg.seed, step])
        n = min(self.cfg.problems_per_step, len(self.train_problems))
        chosen = rng.choice(len(self.train_problems), size=n, replace=False)
        k = range(self.cfg.episodes_per_problem)
        return [self.train_problems[i] for i in chosen for _ in k], [e for _ in chosen for e in k]

    # ---- training ----------------------------------------------------------------------------
    def step(self) -> dict:
        """One TRACER step: play, branch, value, update the controllers; returns its metrics.
        (With the utterance layer on, the trainer runs steps itself: see ``train``.)"""
        return self.play_step()[2]

    def world(self) -> tuple[int, int]:
        """(this process's rank, processes) of the utterance trainer's world; (0, 1) without one."""
        if not self.trains_utterances:
            return 0, 1
        acc = self.generation.trainer.accelerator
        return acc.process_index, acc.num_processes

    def play_step(self) -> tuple[list[Problem], list[str | None], dict]:
        """One step's episodes and controller update: (problems per episode, labels, metrics).

        In a world of N processes each plays its share of the step's problems (``play_share``);
        every process then updates its controllers on the whole step, gathered in the order one
        process plays it (``merge_shares``), so every rank's controllers are one process's."""
        t0, ticks = time.perf_counter(), self.player.ticks
        problems, episodes = self.batch(self.step_count)
        rank, world = self.world()
        share = self.play_share(problems, episodes, rank, world)
        if world > 1:
            from accelerate.utils import gather_object

            shares = gather_object([share])
        else:
            shares = [share]
        step = merge_shares(shares)
        self.engine.load_state_dict({"calls": max(s.calls for s in shares)})  # one seed counter a world
        return problems, step.labels, self.learn(problems, step, t0, ticks)

    def play_share(
        self, problems: Sequence[Problem], episodes: Sequence[int], rank: int, world: int
    ) -> StepShare:
        """Play, branch and value process ``rank``'s share of a step (of ``world`` processes): a
        block of whole problems, so a problem's label-free consensus is its own. Decisions and turns
        keep the step's episode numbers."""
        cfg, mode = self.cfg, self.cfg.controller.values
        per_problem = cfg.episodes_per_problem
        mine = np.array_split(np.arange(len(problems) // per_problem), world)[rank]
        first = int(mine[0]) * per_problem if len(mine) else 0
        last = first + len(mine) * per_problem
        problems, episodes = list(problems[first:last]), list(episodes[first:last])
        self.controller.train()
        self.controller.epoch = self.step_count
        turns: list = []
        silent: list = []

        def kept_in(into: list) -> Callable[[int, Any, Mode], None]:  # numbered in the step
            return lambda i, ctx, m: into.append((first + i, ctx, Mode(m)))

        # the utterance layer's candidate turns: speaking ones, and decisions to stay silent
        records, decisions = play_episodes(self.player, self._reset(problems), episodes, self.state_fn, mode,
                                           on_speak=kept_in(turns), on_silent=kept_in(silent))  # fmt: skip
        branch(self.player, decisions, episodes, mode)
        if cfg.label_free and cfg.consensus_votes == "samples":
            labels = self.sampled_consensus(problems)
        elif cfg.label_free:
            labels = consensus_labels(problems, records,
                                      with_reviews=cfg.consensus_votes == "proposals_and_reviews")
        else:
            labels = [p.answer for p in problems]
        kinds = [p.kind for p in problems]
        values, valid = action_values(decisions, records, labels, kinds, mode, cfg.env.lam, cfg.env.cost_unit)
        played = [replace(d, episode=first + d.episode, alt_record=None, alt_turn=None) for d in decisions]
        calls = self.engine.state_dict()["calls"]
        return StepShare(records, labels, played, values, valid, turns, silent, calls)

    def learn(self, problems: Sequence[Problem], step: StepShare, t0: float, ticks: int) -> dict:
        """The controllers' update on a whole step, and its metrics (logged by the main process)."""
        cfg, records, decisions = self.cfg, step.records, step.decisions
        if self.generation is not None:
            self.generation.turns, self.generation.silent = step.turns, step.silent
        self._update_controller(decisions, step.values, step.valid)
        self.step_count += 1
        rows = self.controller.report()
        metrics = {
            "step": self.step_count,
            "train": episode_metrics(records, cfg.env.lam, cfg.env.cost_unit),
            "decisions": len(decisions),
            "labeled_decisions": int(step.valid.sum()),
            **regret_summary(rows),
            "speak_rate": speak_rates(decisions, self.state_fn.names),
            "regret": rows,
            "ticks": self.player.ticks - ticks,
            "seconds": time.perf_counter() - t0,
        }
        if cfg.label_free:
            metrics["label_accuracy"] = float(
                np.mean(
                    [  # gold read only to report the labels' quality
                        p.answer is not None and answers_equivalent(label, p.answer, p.kind)
                        for label, p in zip(step.labels, problems, strict=True)
                    ]
                )
            )
        if cfg.eval_every and self.step_count % cfg.eval_every == 0 and self.world()[0] == 0:
            metrics["eval"] = {name: self.evaluate(ps) for name, ps in self.eval_sets.items()}
        if self.logger is not None:
            self.log_row()  # a step played without an update of its own (it had nothing to train)
            self._row = (self.step_count, {k: v for k, v in flatten(metrics).items() if k != "step"})
            if not self.trains_utterances:
                self.log_row()
        self.history.append(metrics)
        return metrics

    def sampled_consensus(self, problems: Sequence[Problem]) -> list[str | None]:
        """Label-free labels from ``consensus_samples`` fresh opening proposals per problem, played
        as extra episodes' first turns (episode numbers no real episode uses, on the env pool before
        the step's episodes reset it), so neither the controllers nor the step's episodes shape
        them; one label per entry of ``problems``."""
        k, unique = self.cfg.consensus_samples, list({p.id: p for p in problems}.values())
        envs, contexts = self._reset([p for p in unique for _ in range(k)]), []
        for n, env in enumerate(envs):
            ctx = env.turn_context(env.agent_selection)
            contexts.append(replace(ctx, extras={**ctx.extras, "episode": FRESH_EPISODES + n % k}))
        for env, (action, _) in zip(envs, self.engine._act(contexts), strict=True):  # one call per model
            env.step(action)  # the env reads the answer, as in an episode (code: its program's output)
        labels = {p.id: plurality([env.proposals[0] for env in envs[i * k:(i + 1) * k]], p.kind)[0]
                  for i, p in enumerate(unique)}
        return [labels[p.id] for p in problems]

    def log_row(self, update: Mapping[str, float] | None = None) -> None:
        """Log the played step's row; with the utterance layer, together with the metrics of the
        GSPO update made on its turns (``gspo/loss``, ``gspo/reward``, ``gspo/grad_norm``, ...)."""
        if self._row is not None:
            step, row = self._row
            self.logger.log(step, {**row, **{f"gspo/{k}": v for k, v in (update or {}).items()}})
            self._row = None

    def _update_controller(self, decisions: Sequence, values: np.ndarray, valid: np.ndarray) -> None:
        for role in self.controller.roles:
            rows = [k for k, d in enumerate(decisions) if d.role == role and valid[k]]
            if not rows:
                continue
            states, vals = np.array([decisions[k].state for k in rows]), values[rows]
            if self.cfg.controller.update == "batch_mean":
                states, inverse = np.unique(states, return_inverse=True)
                sums = np.zeros((len(states), 2))
                np.add.at(sums, inverse, vals)
                vals = sums / np.bincount(inverse)[:, None]
            self.controller.update(role, states, vals)

    # ---- evaluation --------------------------------------------------------------------------
    def evaluate(self, problems: Sequence[Problem], controller: Controller | None = None) -> dict:
        """Metrics of one episode per problem with ``controller`` (default: the learned one, playing
        its average strategy); untrained states met are reported by name."""
        learned = controller is None
        if self.generation is not None:
            self.generation.sync()  # a vLLM engine holds the weights of the last generation, not the update
        controller = self.controller.eval() if learned else controller
        before = {r: h.copy() for r, h in self.controller.untrained_hits.items()}
        player = Player(self.engine, controller)
        records, decisions = play_episodes(player, self._reset(problems), [0] * len(problems), self.state_fn)
        self.controller.train()
        out = {
            **episode_metrics(records, self.cfg.env.lam, self.cfg.env.cost_unit),
            "speak_rate": speak_rates(decisions, self.state_fn.names),
        }
        if learned:
            names = self.state_fn.names
            hits = {role: self.controller.untrained_hits[role] - b for role, b in before.items()}
            out["untrained_states_hit"] = {
                role: {names[s]: int(h[s]) for s in np.flatnonzero(h)} for role, h in hits.items()
            }
        return out

    def compare(self, problems: Sequence[Problem], baselines: Sequence[str] | None = None) -> dict[str, dict]:
        """The learned policy and the fixed protocols on the same problems, env and agents."""
        names = self.cfg.baselines if baselines is None else baselines
        out = {"tracer": self.evaluate(problems)}
        for name, controller in baseline_controllers(names, self.cfg.seed).items():
            out[name] = self.evaluate(problems, controller)
        return out

    # ---- checkpoints -------------------------------------------------------------------------
    def save(self, root: str | Path) -> Path:
        """Checkpoint ``root/step-N``: regrets, strategy sums, visits, value ranges (exactly), the
        step and the engine's sampling-seed counter. With the utterance layer this goes inside
        TRL's ``checkpoint-N`` (weights, adapters, optimizer and RNG states are TRL's)."""
        # 0-d entries (strings, scalars, the rng state) go to state.json: the array file holds
        # only numeric arrays, restored bit-exactly.
        arrays, scalars = {}, {}
        for key, value in self.controller.state_dict().items():
            if value.ndim:
                arrays[key] = value
            else:
                scalars[key] = value.item()
        return save_checkpoint(
            root,
            self.step_count,
            arrays=arrays,
            keep_last=self.cfg.save_total_limit,
            state={"controller_scalars": scalars, "engine": self.engine.state_dict()},
        )

    def load(self, path: str | Path) -> None:
        """Restore a checkpoint written by ``save`` (the run resumes at the next step)."""
        ckpt = load_checkpoint(path)
        scalars = {k: np.array(v) for k, v in ckpt.state["controller_scalars"].items()}
        self.controller.load_state_dict({**ckpt.arrays, **scalars})
        self.engine.load_state_dict(ckpt.state["engine"])
        self.step_count = ckpt.step

    def leave_world(self) -> None:
        """Every rank of the trainer's world leaves together (a no-op in one process)."""
        if self.trains_utterances and self.generation.trainer.accelerator.num_processes > 1:
            leave_world(self.generation.trainer)

    @property
    def trains_utterances(self) -> bool:
        return self.generation is not None and self.cfg.generation.enabled

    def resume(self) -> Path | None:
        """Load the newest checkpoint of ``output_dir`` (None if there is none); with the utterance
        layer, returns TRL's checkpoint folder for ``trainer.train(resume_from_checkpoint=...)``."""
        if not self.trains_utterances:
            latest = latest_checkpoint(self.out_dir / "checkpoints")
            if latest is not None:
                self.load(latest)
            return latest
        trainer_ckpt = self.generation.latest_checkpoint()
        if trainer_ckpt is not None:
            self.load(latest_checkpoint(trainer_ckpt / "tracer"))
        return trainer_ckpt

    # ---- the run -----------------------------------------------------------------------------
    def train(self, resume_from: str | Path | None = None) -> list[dict]:
        """Run steps up to ``cfg.max_steps`` (from ``step_count``), evaluating and checkpointing as
        configured; returns the per-step metrics. With the utterance layer the trainer drives the
        steps (one per generation round), resuming from TRL checkpoint ``resume_from``."""
        cfg = self.cfg
        if not self.trains_utterances:
            ckpt_dir = self.out_dir / "checkpoints"
            progress = Progress("tracer", cfg.max_steps, initial=self.step_count)
            while self.step_count < cfg.max_steps:
                train = self.step()["train"]
                progress.update(self.step_count, {k: train.get(k) for k in ("accuracy", "objective")})
                if cfg.save_steps and self.step_count % cfg.save_steps == 0:
                    self.save(ckpt_dir)
            progress.close()
            self.save(ckpt_dir)
            return self.history
        self.generation.train(resume_from)
        if self.logger is not None:
            self.log_row()
        return self.history


class ControllerCheckpoints(_callback_base()):
    """Saves the controllers (and the engine's seed counter) inside each TRL checkpoint."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.tracer.save(Path(args.output_dir) / f"checkpoint-{state.global_step}" / "tracer")


class _UpdateMetrics(_callback_base()):
    """Puts the trainer's logged update metrics (loss, reward, grad norm, KL, ...) into the row of
    the TRACER step whose turns it trained on, so they reach ``metrics.jsonl`` and the trackers."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs and "train_runtime" not in logs and self.tracer.logger:
            self.tracer.log_row({k: v for k, v in logs.items() if isinstance(v, (int, float))})


@register_learner
class TracerLearner(Learner):
    """``councilzoo train tracer CONFIG``: train, then compare with the fixed protocols."""

    name = "tracer"
    config_class = TracerConfig

    def resume_step(self) -> int | None:
        """The newest checkpoint's step: TRL's ``checkpoint-N`` or the controllers' ``step-N``."""
        out = Path(self.cfg.output_dir)
        controllers = [int(p.name.split("-")[1]) for p in (out / "checkpoints").glob("step-*")]
        return max([*checkpoint_steps(out, verify=False), *controllers], default=None)

    @classmethod
    def placement(cls, cfg: TracerConfig, machines: Any, resume: bool = False) -> Placement:
        """TRACER's one world on ``machines`` (``placement.plan_tracer``)."""
        return plan_tracer(cfg, cls.name, machines, resume)

    def train(self, resume: bool = False, overwrite: bool = False) -> list[dict]:
        """Plan TRACER's world on this machine (``placement.plan_tracer``), check the output folder,
        write the plan and run the world: one process here, in this process; N processes started by
        the launcher every learner shares (``corl.launch.run_plan``, under torchrun). Returns the
        learned controllers' accuracy on the first evaluation set (``summary.json``)."""
        from councilzoo.learners.corl.launch import run_plan

        cfg, out = self.cfg, Path(self.cfg.output_dir)
        if os.environ.get("WORLD_SIZE", "1") != "1":
            raise ConfigError("councilzoo train tracer starts its own world: set num_processes in the config "
                              "instead of running it under torchrun or accelerate")  # fmt: skip
        machines = Machines.here()
        plan = self.placement(cfg, machines, resume)
        held = (out / "checkpoints").is_dir() or bool(checkpoint_steps(out, verify=False))
        if held and not (resume or overwrite):
            raise ConfigError(f"output_dir {str(out)!r} already holds checkpoints of a run: pass --resume to "
                              "continue it or --overwrite to start again")
        if overwrite and not resume:
            shutil.rmtree(out, ignore_errors=True)
        if cfg.generation.enabled:  # TRL's checkpoint-N folders, else the controllers' own
            check_checkpoint_folder(out, resume, TRAINER_CHECKPOINT_RE)
        else:
            check_checkpoint_folder(out / "checkpoints", resume)
        write_run_files(out, cfg, seed=cfg.seed, learner="tracer")
        path = plan.write(out)
        [world] = plan.worlds
        if world.launcher == "python":
            return run_world(plan, world, cfg)
        run_plan(plan, path, [(0, node) for node in world.nodes], machines)
        return _summary_rows(json.loads((out / "summary.json").read_text())["eval"])


def run_world(plan: Placement, world: World, cfg: TracerConfig) -> list[dict]:
    """One process of TRACER's world, with the trainer settings the plan holds: train, then (rank 0)
    compare with the fixed protocols and write ``summary.json``. Rank 0 plays its share, logs,
    evaluates and writes; the other ranks play and train their shares and wait for rank 0 to finish
    (``generation.trainer.ddp_timeout`` bounds the wait)."""
    out = Path(cfg.output_dir)
    tracer = Tracer(cfg, trainer_settings=world.members[0].grpo if world.members else None)
    resume_from = tracer.resume() if plan.resume else None
    if tracer.world()[0] != 0:
        tracer.train(resume_from)
        tracer.leave_world()
        return []
    if plan.resume:
        _keep_rows_up_to(out / "metrics.jsonl", tracer.step_count)
    with MetricsLogger(out, cfg.report_to, resume=plan.resume) as logger:
        tracer.logger = logger
        tracer.train(resume_from)
    summary = {name: tracer.compare(problems) for name, problems in tracer.eval_sets.items()}
    summary_rows = tracer.controller.report()
    (out / "summary.json").write_text(
        json.dumps({"eval": summary, "regret": summary_rows, **regret_summary(summary_rows)}, indent=1,
                   default=float)
    )
    for name, protocols in summary.items():
        print(f"\n{name}: protocol | accuracy | objective | calls/q | correction | preservation")
        for protocol, m in protocols.items():
            cells = [m["accuracy"], m["objective"], m["calls_per_question"], m["correction_rate"],
                     m["preservation_rate"]]
            print(f"  {protocol:13s} | " + " | ".join(_fmt(c) for c in cells))
    print(f"\nregret <= bound in every state: {not regret_summary(summary_rows)['states_over_bound']}; "
          f"results in {out}")
    tracer.leave_world()
    return _summary_rows(summary)


def _summary_rows(summary: Mapping[str, Mapping[str, dict]]) -> list[dict]:
    """The run's row: the learned controllers' accuracy on the first evaluation set."""
    return [{"accuracy": next(iter(summary.values()), {}).get("tracer", {}).get("accuracy")}]


def _keep_rows_up_to(path: Path, step: int) -> None:
    """Drop the metric rows a killed run wrote past its last checkpoint (a resume rewrites them)."""
    rows = read_metrics(path) if path.is_file() else []
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r.get("step", 0) <= step))


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
