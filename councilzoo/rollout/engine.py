"""The rollout engine: many envs in lockstep, one batched generate call per model per tick.

``RolloutEngine(env, agents, num_envs=M).run(problems)`` plays every (problem, episode) pair and
returns their ``EpisodeRecord``s in input order. ``M`` raw envs advance together: each tick
collects the turns pending in every live env (the agent on turn, or in a simultaneous round every
agent still to act in it: the env's ``upcoming_turns``), groups the turns of batched agents (any
``agents.base.BatchedAgent``, e.g. ``LLMAgent``) by generator and sampling settings (two roles
or two agents sharing one model make ONE call), calls ``generate`` once per group (a turn drawing
n samples is n rows of that call), calls every other agent's ``act`` once with all its turns,
then steps each env through its turns in order. A speaking LLM turn's ``Turn`` gets the prompt
token ids, completion token ids and log-probs of the completion it committed to, for learners.

Results stream to ``jsonl_path`` (``rollout/log.EpisodeLog``: one line per finished episode,
keyed by problem id and episode index). Rerunning with the same path skips every finished key,
so an interrupted evaluation resumes where it stopped with no lost and no duplicated episode. An
error raised by an agent or a generator stops the run after the episodes already finished are
on disk.

``play(envs, episodes, controller=...)`` is the same lockstep loop over envs the caller reset (or
deep-copied mid-episode), one turn per env and tick (its hook may snapshot the env before each
turn): a ``Controller`` picks every turn's mode, the agent is called only for
speaking modes, with ``legal_modes`` narrowed to the chosen one; a first mode can be forced per
env and a hook sees every turn before it is stepped. TRACER plays and branches its episodes
through it (``learners/tracer/controller_layer.py``).

Determinism: agents see ``TurnContext.extras["episode"]`` (the episode index); simulated agents
draw from counters keyed by problem, episode, round and turn, so records do not depend on ``M``.
LLM sampling is seeded per generate call from ``seed`` (or the agent's ``Sampling.seed``) and the
engine's call counter: reproducible for a given ``M``, never the same seed twice.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from pettingzoo import ParallelEnv

from councilzoo.agents.base import Agent, BatchedAgent, Completion
from councilzoo.agents.binding import AgentBinding, bind_agents
from councilzoo.agents.controllers import Controller, is_silent
from councilzoo.agents.llm import call_sampling, generate_requests
from councilzoo.envs.types import Action, EpisodeRecord, Mode, Turn, TurnContext
from councilzoo.progress import LockstepProgress
from councilzoo.rollout.log import EpisodeLog, Key
from councilzoo.tasks import Problem

__all__ = ["TurnHook", "RolloutStats", "RolloutEngine"]

TurnHook = Callable[[int, Any, TurnContext, Mode], None]  # (env position, env, context, chosen mode)


@dataclass
class _Slot:
    env: Any
    index: int
    key: Key | None = None


@dataclass
class _Control:
    """What ``play`` adds to a tick: the controller, modes still to force per env, the hook."""

    controller: Controller
    forced: list[Mode | None]
    on_turn: TurnHook | None


@dataclass
class RolloutStats:
    """Counters since the last ``run`` began (``play`` adds to them): ticks, turns played, generate
    calls, episodes finished by ``run``, tokens generated."""

    ticks: int = 0
    turns: int = 0
    generate_calls: int = 0
    episodes: int = 0
    completion_tokens: int = 0
    batch_sizes: list[int] = field(default_factory=list)


class RolloutEngine:
    """Plays episodes of one game with ``num_envs`` envs in lockstep (see the module docstring).

    ``env`` is an env id (``"councilzoo/debate-v0"``, built with ``env_kwargs``) or a zero-argument
    callable returning an env; ``agents`` maps agent names or roles to Agents (``bind_agents``).
    ``progress`` draws a bar per ``run`` labelled ``label`` (default: the env id).
    """

    def __init__(
        self,
        env: str | Callable[[], Any],
        agents: Mapping[str, Agent],
        num_envs: int = 8,
        *,
        env_kwargs: Mapping[str, Any] | None = None,
        seed: int = 0,
        progress: bool = True,
        label: str | None = None,
        jsonl_path: str | os.PathLike | None = None,
    ) -> None:
        if int(num_envs) != num_envs or num_envs < 1:
            raise ValueError(f"RolloutEngine: num_envs must be an integer >= 1, got {num_envs!r}")
        if isinstance(env, str):
            from councilzoo.envs import make

            env_id, kwargs = env, dict(env_kwargs or {})
            make(env_id, **kwargs)  # unknown ids and keywords fail here, before any work
            self.env_fn: Callable[[], Any] = lambda: make(env_id, **kwargs)
        elif callable(env):
            if env_kwargs:
                raise ValueError("RolloutEngine: env_kwargs only applies when env is an env id string")
            self.env_fn = env
        else:
            raise TypeError(f"RolloutEngine: env must be an env id or a callable returning one, got {env!r}")
        self.num_envs, self.seed, self.progress = int(num_envs), seed, progress
        self.log = EpisodeLog(jsonl_path) if jsonl_path is not None else None
        self._envs = [self._make_env() for _ in range(self.num_envs)]  # reused across runs
        self.env_id: str = getattr(self._envs[0], "env_id", type(self._envs[0]).__module__)
        self.label = label or self.env_id
        self.binding: AgentBinding = bind_agents(self._envs[0], agents)
        self.stats = RolloutStats()
        self._calls = 0  # generate calls over the engine's life: per-call sampling seeds

    def _make_env(self) -> Any:
        env = self.env_fn()
        return getattr(env, "unwrapped", env)

    # ---- public API --------------------------------------------------------------------------
    def run(self, problems: Sequence[Problem], episodes_per_problem: int = 1) -> list[EpisodeRecord]:
        """Play ``episodes_per_problem`` episodes of every problem; records in input order."""
        keys = self._keys(problems, episodes_per_problem)
        by_id = {p.id: p for p in problems}
        done = self.log.load() if self.log else {}
        foreign = {r.env_id for r in done.values()} - {self.env_id}
        if foreign:
            raise ValueError(f"{self.log.path} holds episodes of {sorted(foreign)}, not {self.env_id}")
        queue = [k for k in keys if k not in done]
        self.stats = RolloutStats()
        slots = [self._slot(i) for i in range(min(self.num_envs, len(queue)))]
        bar = LockstepProgress(len(keys), len(keys) - len(queue), len(slots), self.label, self.progress)
        with bar, self.log if self.log else nullcontext():
            live = []
            for slot in slots:
                self._start(slot, queue.pop(0), by_id)
                live.append(slot)
            while live:
                self._tick(live)
                bar.played(self.stats.turns)
                still = []
                for slot in live:
                    if not self._finished(slot.env):
                        still.append(slot)
                        continue
                    done[slot.key] = self._finish(slot)
                    bar.finished()
                    if queue:
                        self._start(slot, queue.pop(0), by_id)
                        still.append(slot)
                live = still
        return [done[k] for k in keys]

    def play(
        self,
        envs: Sequence[Any],
        episodes: Sequence[int],
        *,
        controller: Controller,
        first_modes: Sequence[Mode | None] | None = None,
        max_turns: int | None = None,
        on_turn: TurnHook | None = None,
    ) -> None:
        """Play raw ``envs`` from where they stand to the end (or ``max_turns`` turns each).

        ``controller`` chooses every turn's mode; ``episodes[i]`` is env i's episode index (what
        ``TurnContext.extras["episode"]`` holds); ``first_modes[i]`` forces env i's next mode;
        ``on_turn(i, env, ctx, mode)`` runs before each turn is stepped, with the unnarrowed
        context. Nothing is logged: the caller owns these envs and their records.
        """
        if len(episodes) != len(envs) or (first_modes is not None and len(first_modes) != len(envs)):
            raise ValueError("play: episodes and first_modes need one entry per env")
        forced = list(first_modes) if first_modes is not None else [None] * len(envs)
        control = _Control(controller, forced, on_turn)
        slots = [_Slot(env, i, ("", int(e))) for i, (env, e) in enumerate(zip(envs, episodes, strict=True))]
        played = [0] * len(slots)
        live = [slot for slot in slots if not self._finished(slot.env)]
        while live:
            self._tick(live, control)
            for slot in live:
                played[slot.index] += 1
            live = [
                slot for slot in live
                if not self._finished(slot.env) and (max_turns is None or played[slot.index] < max_turns)
            ]

    def reset_seeds(self) -> None:
        """Replay the per-call sampling seeds from the first call (``call_sampling``), so protocols
        played one after another draw the same samples on the same calls (common random numbers)."""
        self._calls = 0

    def state_dict(self) -> dict[str, int]:
        """The per-call seed counter: checkpointed with a learner, so a resumed run samples what
        the uninterrupted run would have."""
        return {"calls": self._calls}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        self._calls = int(state["calls"])

    # ---- internals ---------------------------------------------------------------------------
    @staticmethod
    def _keys(problems: Sequence[Problem], episodes: int) -> list[Key]:
        if int(episodes) != episodes or episodes < 1:
            raise ValueError(f"episodes_per_problem must be an integer >= 1, got {episodes!r}")
        seen: set[str] = set()
        for i, problem in enumerate(problems):
            if not isinstance(problem, Problem):
                raise TypeError(f"problems[{i}] is a {type(problem).__name__}; expected a councilzoo Problem")
            if problem.id in seen:
                raise ValueError(f"problem id {problem.id!r} appears twice; episodes are keyed by problem id")
            seen.add(problem.id)
        return [(p.id, k) for p in problems for k in range(int(episodes))]

    def _slot(self, index: int) -> _Slot:
        env = self._envs[index]
        env.env_index = index
        return _Slot(env, index)

    def _start(self, slot: _Slot, key: Key, by_id: Mapping[str, Problem]) -> None:
        slot.key = key
        slot.env.reset(options={"problem": by_id[key[0]]})

    @staticmethod
    def _finished(env: Any) -> bool:
        if isinstance(env, ParallelEnv):
            return not env.agents
        return all(env.terminations.values())

    def _finish(self, slot: _Slot) -> EpisodeRecord:
        record = slot.env.episode_record()
        self.stats.episodes += 1
        if self.log:
            self.log.append(slot.key, record)
        return record

    @staticmethod
    def _pending(slot: _Slot, together: bool) -> list[TurnContext]:
        """The turns ``slot``'s env can play now: every agent of a parallel env; with ``together``
        an AEC env's ``upcoming_turns`` (a simultaneous round at once), else the agent on turn."""
        env = slot.env
        if isinstance(env, ParallelEnv):
            contexts = [env.turn_context(name) for name in env.agents]
        elif together and hasattr(env, "upcoming_turns"):
            contexts = env.upcoming_turns()
        else:
            contexts = [env.turn_context(env.agent_selection)]
        for ctx in contexts:
            ctx.extras["episode"] = slot.key[1]
        return contexts

    def _tick(self, live: list[_Slot], control: _Control | None = None) -> None:
        """One lockstep step of every live env."""
        self.stats.ticks += 1
        turns = [(slot, ctx) for slot in live for ctx in self._pending(slot, together=control is None)]
        self.stats.turns += len(turns)
        if control is None:
            actions = self._act([ctx for _, ctx in turns])
        else:
            actions = self._act_controlled(turns, control)
        by_slot: dict[int, list[tuple[TurnContext, Action, Completion | None]]] = {}
        for (slot, ctx), (action, completion) in zip(turns, actions, strict=True):
            by_slot.setdefault(slot.index, []).append((ctx, action, completion))
        for slot in live:
            entries = by_slot[slot.index]
            before = len(slot.env.transcript)
            if isinstance(slot.env, ParallelEnv):
                slot.env.step({ctx.agent: action for ctx, action, _ in entries})
            else:
                for ctx, action, _ in entries:
                    if self._finished(slot.env):  # a game that ends mid-round drops the rest
                        break
                    if slot.env.agent_selection != ctx.agent:
                        raise RuntimeError(f"{self.env_id}: upcoming_turns() listed {ctx.agent!r}, but "
                                           f"{slot.env.agent_selection!r} is on turn")
                    slot.env.step(action)
            completions = {ctx.agent: completion for ctx, _, completion in entries}
            for turn in slot.env.transcript[before:]:
                _attach(turn, completions.get(turn.agent))

    def _act_controlled(
        self, turns: list[tuple[_Slot, TurnContext]], control: _Control
    ) -> list[tuple[Action, Completion | None]]:
        """The controller's modes; agents speak only where a speaking mode was chosen."""
        modes = [Mode(m) for m in control.controller.choose([ctx for _, ctx in turns])]
        out: list[tuple[Action, Completion | None] | None] = [None] * len(turns)
        speaking = []
        for k, (slot, ctx) in enumerate(turns):
            if control.forced[slot.index] is not None:
                modes[k], control.forced[slot.index] = Mode(control.forced[slot.index]), None
            if control.on_turn is not None:
                control.on_turn(slot.index, slot.env, ctx, modes[k])
            if is_silent(modes[k]):
                out[k] = (Action(modes[k]), None)
            else:
                speaking.append(k)
        narrowed = [replace(turns[k][1], legal_modes=(modes[k],)) for k in speaking]
        for k, acted in zip(speaking, self._act(narrowed), strict=True):
            out[k] = acted
        return out  # type: ignore[return-value]

    def _act(self, contexts: list[TurnContext]) -> list[tuple[Action, Completion | None]]:
        """Actions for ``contexts``: one generate call per (generator, sampling), one act per agent."""
        groups: dict[int, tuple[Agent, list[int]]] = {}
        for i, ctx in enumerate(contexts):
            agent = self.binding.agent_for(ctx.agent, ctx.role)
            groups.setdefault(id(agent), (agent, []))[1].append(i)
        out: list[tuple[Action, Completion | None] | None] = [None] * len(contexts)
        calls: dict[tuple[int, Any], tuple[Any, Any, list]] = {}  # (generator, sampling) -> requests
        for agent, indices in groups.values():
            batch = [contexts[i] for i in indices]
            if isinstance(agent, BatchedAgent):
                shared = getattr(agent.generator, "shared", agent.generator)  # seats of one base: one call
                key = (id(shared), agent.sampling)
                entry = calls.setdefault(key, (shared, agent.sampling, []))
                entry[2].extend((agent, i, req) for i, req in zip(indices, agent.plan(batch), strict=True))
                continue
            actions = agent.act(batch)
            if len(actions) != len(batch):
                raise ValueError(f"{agent!r}.act returned {len(actions)} actions for {len(batch)} contexts")
            for i, action in zip(indices, actions, strict=True):
                out[i] = (action, None)
        for generator, sampling, planned in calls.values():
            requests = [req for _, _, req in planned]
            if any(r.messages is not None for r in requests):
                self.stats.generate_calls += 1
                self.stats.batch_sizes.append(sum(r.n for r in requests if r.messages is not None))
            base = sampling if sampling.seed is not None else replace(sampling, seed=self.seed)
            if generator is not planned[0][0].generator:  # adapters of one base: each prompt its own
                generator = generator.mixed({id(r.messages): a.generator.adapter for a, _, r in planned})
            results = generate_requests(generator, requests, call_sampling(base, self._calls))
            self._calls += 1
            for (agent, i, request), completions in zip(planned, results, strict=True):
                out[i] = agent.finish(request, completions)
                self.stats.completion_tokens += sum(c.completion_tokens for c in completions)
        return out  # type: ignore[return-value]


def _attach(turn: Turn, completion: Completion | None) -> None:
    """Copy the tokens a learner needs from ``completion`` onto ``turn``."""
    if completion is None:
        return
    turn.prompt_token_ids = list(completion.prompt_token_ids)
    turn.token_ids = list(completion.token_ids)
    turn.logprobs = None if completion.logprobs is None else list(completion.logprobs)

