"""Checkers for users' own games and agents: plain functions that raise AssertionError naming the
broken contract and a shrunk counterexample, usable from any test runner (or none).

``check_env(env)`` runs PettingZoo's own tests (``api_test``, ``seed_test``, ``render_test``; for
a game with a parallel form also ``parallel_api_test``, ``parallel_seed_test`` and
``max_cycles_test``) and hypothesis properties over whole episodes played by random legal
actions with garbage model text: the observation and ``turn_context`` agree; the action mask is
the legal modes, and every masked mode is accepted; costs add up per agent and match what the
actions reported; the episode ends; replaying the seed and actions gives the same episode; a
``deepcopy`` taken at any step replays identically; rewards follow the game's declared rule.

``check_agent(agent)`` draws batches of turn contexts from every registered game and role, with
odd problems, and checks that ``act`` returns one legal ``Action`` per context, in order, never
raises, and reports its costs.

Both run under the hypothesis profile loaded at the time (``councilzoo.testing.load_profile``)
unless given ``settings=``. The counterexample in the message is the minimal one hypothesis
shrank to.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import io
import math
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given
from hypothesis import settings as Settings
from hypothesis import strategies as st
from pettingzoo.test import (
    api_test,
    max_cycles_test,
    parallel_api_test,
    parallel_seed_test,
    render_test,
    seed_test,
)

from councilzoo.envs import PARALLEL_GAMES, cohort_v0, make_parallel
from councilzoo.envs.council_env import (
    CouncilEnv,
    as_action,
    grade,
    render_problem,
    render_turn,
    team_reward,
    to_printable,
)
from councilzoo.envs.rewards import compute_rewards
from councilzoo.envs.types import SILENT_MODES, Action, Cost, Mode, TurnContext
from councilzoo.testing.falsify import ContractViolation, falsify
from councilzoo.testing.gates import check_gate
from councilzoo.testing.learners import check_learner
from councilzoo.testing.regret import as_matcher, check_no_regret
from councilzoo.testing.strategies import (
    MAX_STEPS,
    Episode,
    Step,
    actions,
    env_factory,
    env_name,
    mask_modes,
    play,
    problems,
    shorten,
    turn_contexts,
)

__all__ = [
    "ContractViolation",
    "as_matcher",
    "check_agent",
    "check_env",
    "check_episode",
    "check_gate",
    "check_learner",
    "check_no_regret",
    "falsify",
]

_Rule = Callable[[Episode], dict[str, float]]
RENDERED = (CouncilEnv, cohort_v0.parallel_env)  # games whose transcript text councilzoo renders


def _settings(settings: Settings | None) -> Settings:
    """The given settings, or the loaded profile's, reporting one bug (the first shrunk); a long
    episode is a finding ("never ends"), not a health-check failure."""
    base = settings or Settings()
    quiet = [*base.suppress_health_check, HealthCheck.large_base_example, HealthCheck.data_too_large]
    return Settings(base, report_multiple_bugs=False, deadline=None, suppress_health_check=quiet)


def _fail(name: str, contract: str, detail: str, example: Any) -> None:
    raise ContractViolation(f"{name}: {contract}: {detail}\nshrunk counterexample: {example!r}")


# ---- check_env ---------------------------------------------------------------------------------
def check_env(
    env: str | Callable[[], Any],
    *,
    reward: _Rule | None = None,
    max_steps: int = MAX_STEPS,
    pettingzoo_tests: bool = True,
    cycles: int = 100,
    settings: Settings | None = None,
    **kwargs: Any,
) -> None:
    """Check the game ``env`` (a registered id with ``kwargs``, or a zero-argument callable
    returning a fresh AEC env with ``turn_context``) against PettingZoo's tests and councilzoo's
    contracts (module docstring). ``reward(episode)`` gives each agent's expected return for a
    game of your own (councilzoo's games declare theirs); ``cycles`` bounds PettingZoo's tests."""
    factory = env_factory(env, **kwargs)
    probe = factory()
    probe.reset(seed=0)
    name = f"check_env({env_name(probe)})"
    if not callable(getattr(probe, "turn_context", None)):
        raise TypeError(
            f"{name}: the env has no turn_context(agent); councilzoo games expose one (docs/envs.md)"
        )
    _check_ends(factory, name, max_steps)
    _check_episodes(factory, name, reward, max_steps, _settings(settings))
    if pettingzoo_tests:
        _pettingzoo_tests(env, factory, name, cycles, kwargs)


PROBE_SEEDS = 3  # plain episodes played before the properties: each ends, or the check stops at once


def _check_ends(factory, name: str, max_steps: int) -> None:
    """Play ``PROBE_SEEDS`` episodes with seeded random legal modes (no text) outside hypothesis: a
    game that never ends is reported after ``max_steps`` steps of one episode, in one message,
    rather than as hypothesis' health check on a huge input, or after minutes of shrinking."""
    for seed in range(PROBE_SEEDS):
        env = factory()
        try:
            episode = play(env, seed, partial(_random_mode, np.random.default_rng(seed)), max_steps)
        except Exception:  # noqa: BLE001 - a crash is the properties' finding, with its shrunk example
            return
        if not episode.ended:
            shown = 3 * len(env.possible_agents)
            _fail(
                name,
                "the episode never ends",
                f"agents {env.agents} still playing after {max_steps} steps (random legal modes, no "
                f"text); the first {shown} steps below",
                dataclasses.replace(episode, steps=episode.steps[:shown]),
            )


def _random_mode(rng: np.random.Generator, env: Any, context: TurnContext, obs: Any) -> Action:
    modes = mask_modes(obs)
    modes = list(context.legal_modes if modes is None else modes)
    return Action(modes[rng.integers(len(modes))])


def _check_episodes(factory, name: str, reward: _Rule | None, max_steps: int, settings: Settings) -> None:
    @settings
    @given(st.integers(0, 2**16), st.data())
    def contracts(seed: int, data: st.DataObject) -> None:
        env = factory()
        steps: list[Step] = []

        def choose(env: Any, context: TurnContext, obs: Any) -> Action:
            so_far = Episode(env_name(env), seed, list(steps), {}, None, env, False)
            _check_observation(name, env, context, obs, so_far)
            modes = mask_modes(obs)
            modes = list(context.legal_modes if modes is None else modes)
            action = data.draw(actions(context, modes))
            steps.append(Step(context.agent, obs, context, action))
            return action

        try:
            episode = play(env, seed, choose, max_steps)
        except ContractViolation:
            raise
        except Exception as err:  # noqa: BLE001 - any exception from the game is the finding
            _fail(
                name,
                "a masked action crashed the game",
                f"step {len(steps) - 1} raised {type(err).__name__}: {err}",
                Episode(env_name(env), seed, steps, {}, None, env, False),
            )
        if not episode.ended:
            _fail(
                name,
                "the episode never ends",
                f"agents {env.agents} still playing after {max_steps} steps",
                episode,
            )
        check_episode(episode, reward=reward)
        _check_replay(name, factory, episode)
        _check_branch(
            name, factory, episode, data.draw(st.integers(0, len(episode.steps)), label="branch at step")
        )

    contracts()


def _check_observation(name: str, env: Any, context: TurnContext, obs: Any, so_far: Episode) -> None:
    """The observation of the agent on turn agrees with its turn_context."""
    agent = env.agent_selection
    if context.agent != agent:
        _fail(
            name,
            "turn_context is not the agent's",
            f"turn_context({agent!r}).agent is {context.agent!r}",
            so_far,
        )
    if not context.legal_modes:
        _fail(name, "an agent on turn has no legal mode", f"{agent} ({context.role})", so_far)
    masked = mask_modes(obs)
    if masked is not None and set(masked) != set(context.legal_modes):
        _fail(
            name,
            "action mask and legal modes differ",
            f"{agent}'s action_mask allows {sorted(m.name for m in masked)} but turn_context({agent!r})."
            f"legal_modes is {sorted(Mode(m).name for m in context.legal_modes)}",
            so_far,
        )
    if (
        isinstance(obs, dict)
        and "features" in obs
        and not np.array_equal(np.asarray(obs["features"]), np.asarray(context.features), equal_nan=True)
    ):
        _fail(
            name,
            "observation features and turn_context differ",
            f"{agent}: obs {obs['features']} vs context {context.features}",
            so_far,
        )
    if isinstance(env.unwrapped, RENDERED) and isinstance(obs.get("transcript"), str):
        text = obs["transcript"]
        head = to_printable(render_problem(context.problem))[:200]
        if not text.startswith(head):
            _fail(
                name,
                "observation transcript does not show the context's problem",
                f"{agent}: {text[:80]!r} does not start with {head[:80]!r}",
                so_far,
            )
        if context.transcript:
            tail = to_printable(render_turn(context.transcript[-1]))[-200:]
            if not text.endswith(tail):
                _fail(
                    name,
                    "observation transcript does not end with the context's last turn",
                    f"{agent}: {text[-80:]!r} does not end with {tail[-80:]!r}",
                    so_far,
                )


def _sum(costs) -> Cost:
    total = Cost()
    for cost in costs:
        total.add(cost)
    return total


def _check_costs(name: str, episode: Episode) -> None:
    """Total = sum over agents = sum over turns; each agent's turns cost what its actions reported."""
    record = episode.record
    if record is None:
        return
    by_turn, by_agent = _sum(t.cost for t in record.turns), _sum(record.cost_by_agent.values())
    if not record.cost == by_turn == by_agent:
        _fail(
            name,
            "costs do not add up",
            f"total {record.cost}, sum of turns {by_turn}, sum of agents {by_agent}",
            episode,
        )
    for agent, cost in record.cost_by_agent.items():
        turns = [t for t in record.turns if t.agent == agent]
        if _sum(t.cost for t in turns) != cost:
            _fail(
                name,
                "an agent's cost is not the sum of its turns",
                f"{agent}: {cost} vs turns {_sum(t.cost for t in turns)}",
                episode,
            )
        acted = [s.action for s in episode.steps if s.agent == agent][-len(turns) :] if turns else []
        for turn, action in zip(turns, acted, strict=True):
            tokens = (turn.cost.prompt_tokens, turn.cost.completion_tokens)
            if tokens != (action.prompt_tokens, action.completion_tokens) or (
                action.calls and turn.cost.calls != action.calls
            ):
                _fail(
                    name,
                    "a turn's cost is not what its action reported",
                    f"{agent} {turn.mode.name}: turn {turn.cost} vs action calls={action.calls}, "
                    f"tokens={action.prompt_tokens}+{action.completion_tokens}",
                    episode,
                )


def _declared_returns(episode: Episode) -> dict[str, float] | None:
    """Each agent's return under the rule a councilzoo game declares, or None for other games:
    turn-based games pay every agent ``correct - lam * cost``; the cohort pays each member the
    mean of its samples' rewards under ``reward_rule`` (checked against ``compute_rewards``)."""
    raw, record = episode.env.unwrapped, episode.record
    if record is None or "forfeit" in record.info:
        return None
    if isinstance(raw, CouncilEnv):
        correct = grade(record.final_answer, raw.problem)
        expected = team_reward(correct, record.cost, raw.lam, raw.cost_unit)
        if correct != record.correct or not math.isclose(expected, record.reward, abs_tol=1e-9):
            return {"(record)": expected}
        return dict.fromkeys(raw.possible_agents, expected)
    if isinstance(raw, cohort_v0.parallel_env):
        members = record.info["members"]
        answers = [members[a]["sample_answers"] for a in raw.possible_agents]
        gold = raw.problem.answer if raw.reward_rule == "ground_truth" else None
        result = compute_rewards(raw.reward_rule, answers, raw.problem.kind, gold=gold, tau=raw.tau)
        if result.rewards != [members[a]["sample_rewards"] for a in raw.possible_agents]:
            return {"(sample rewards)": -1.0}
        if raw.max_cycles != 1:
            return None  # earlier items' rewards are not in the record
        return {
            a: sum(r) / len(r) if r else 0.0 for a, r in zip(raw.possible_agents, result.rewards, strict=True)
        }
    return None


def check_episode(episode: Episode, *, reward: _Rule | None = None) -> None:
    """The contracts one played episode must meet on its own (for your own ``@given`` tests over
    ``strategies.episodes``): costs add up per agent and match the actions, and rewards follow
    ``reward`` or the game's declared rule."""
    name = f"check_episode({episode.name})"
    _check_costs(name, episode)
    _check_rewards(name, episode, reward)


def _check_rewards(name: str, episode: Episode, reward: _Rule | None) -> None:
    expected = reward(episode) if reward is not None else _declared_returns(episode)
    if expected is None:
        return
    got = {a: episode.returns.get(a) for a in expected}
    if any(
        g is None or not math.isclose(g, e, abs_tol=1e-9)
        for g, e in zip(got.values(), expected.values(), strict=True)
    ):
        _fail(name, "rewards do not follow the declared rule", f"returns {got}, expected {expected}", episode)


def _advance(env: Any, actions: Sequence[Action]) -> None:
    """Step ``env`` (already reset) through ``actions``, stepping None for agents that are done,
    until the actions run out (mid-episode) or the episode ends."""
    todo = list(actions)
    while env.agents:
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            env.step(None)
        elif todo:
            env.step(todo.pop(0))
        else:
            return


def _outcome(env: Any) -> Any:
    record = env.episode_record().to_dict() if hasattr(env, "episode_record") else None
    return record, dict(env._cumulative_rewards)


def _check_replay(name: str, factory, episode: Episode) -> None:
    """The same seed and actions give the same observations, returns and record."""
    scripted = iter(episode.actions)

    def choose(env: Any, context: TurnContext, obs: Any) -> Action:
        action = next(scripted, None)
        if action is None:
            _fail(
                name, "not deterministic under a seed", "the replay goes on after the recorded steps", episode
            )
        return action

    again = play(factory(), episode.seed, choose)
    for i, (a, b) in enumerate(zip(episode.steps, again.steps, strict=False)):
        if a.agent != b.agent or not _same_observation(a.observation, b.observation):
            _fail(
                name, "not deterministic under a seed", f"step {i} differs on replay: {a!r} vs {b!r}", episode
            )
    same_record = (episode.record is None) == (again.record is None) and (
        episode.record is None or episode.record.to_dict() == again.record.to_dict()
    )
    if len(again.steps) != len(episode.steps) or episode.returns != again.returns or not same_record:
        _fail(
            name,
            "not deterministic under a seed",
            f"replay took {len(again.steps)} steps, returns {again.returns} (first run: {episode.returns})",
            episode,
        )


def _same_observation(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_observation(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
    return a == b


def _check_branch(name: str, factory, episode: Episode, k: int) -> None:
    """A deepcopy after ``k`` actions, stepped through the rest, ends as the original does."""
    env = factory()
    env.reset(seed=episode.seed)
    _advance(env, episode.actions[:k])
    twin = copy.deepcopy(env)
    for e in (env, twin):
        _advance(e, episode.actions[k:])
    if _outcome(env) != _outcome(twin):
        _fail(
            name,
            f"a deepcopy taken after step {k - 1} does not replay identically",
            f"record and rewards differ: {_outcome(env)[1]} vs {_outcome(twin)[1]}",
            episode,
        )


def _accepts_render_mode(factory) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind is p.VAR_KEYWORD or p.name == "render_mode" for p in params)


def _pettingzoo_tests(env, factory, name: str, cycles: int, kwargs: dict | None = None) -> None:
    """PettingZoo's own tests that apply; any failure becomes an AssertionError naming the test."""
    tests = {
        "api_test": lambda: api_test(factory(), num_cycles=cycles),
        "seed_test": lambda: seed_test(factory, num_cycles=cycles),
    }
    if _accepts_render_mode(factory) and factory().metadata.get("render_modes"):
        tests["render_test"] = lambda: render_test(factory)
    if isinstance(env, str) and env in PARALLEL_GAMES:
        parallel = partial(make_parallel, env, **(kwargs or {}))
        tests["parallel_api_test"] = lambda: parallel_api_test(parallel(), num_cycles=cycles)
        tests["parallel_seed_test"] = lambda: parallel_seed_test(parallel, num_cycles=cycles)
        tests["max_cycles_test"] = lambda: max_cycles_test(
            SimpleNamespace(parallel_env=parallel, env=factory)
        )
    for test, run in tests.items():
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):  # "human" renders print
            warnings.simplefilter("ignore", UserWarning)  # PettingZoo's style notes on Dict/Text spaces
            try:
                run()
            except Exception as err:  # noqa: BLE001 - reported as the test's failure
                raise AssertionError(
                    f"{name}: pettingzoo.test.{test} failed: {type(err).__name__}: {err}"
                ) from err


# ---- check_agent -------------------------------------------------------------------------------
def _describe_context(context: TurnContext) -> str:
    """One line per context: who is on turn, what is legal, which problem (a readable example)."""
    p = context.problem
    return (
        f"{context.agent} ({context.role}, round {context.round}, legal "
        f"{[Mode(m).name for m in context.legal_modes]}, {len(context.transcript)} turns seen) on "
        f"{p.kind} problem {p.id!r} {shorten(p.question)}"
    ) + (f" with {len(p.images)} images" if p.images else "")


class _Batch(list):
    """A batch of contexts that prints one line per context."""

    def __repr__(self) -> str:
        return "batch of {} contexts:\n{}".format(
            len(self), "\n".join(f"  {i}. {_describe_context(c)}" for i, c in enumerate(self))
        )


def _with_problem(context: TurnContext, problem) -> TurnContext:
    return TurnContext(
        context.env_index,
        context.agent,
        context.role,
        context.round,
        problem,
        context.transcript,
        context.legal_modes,
        context.features,
        dict(context.extras),
    )


def _contexts_with_odd_problems(env=None, roles=None) -> st.SearchStrategy[TurnContext]:
    """Turn contexts of played episodes, and the same with their problem swapped for an odd one."""
    played = turn_contexts(env, roles)
    return st.one_of(
        played, st.builds(_with_problem, played, problems(("numeric", "multiple_choice", "math")))
    )


def check_agent(
    agent: Any,
    *,
    contexts: st.SearchStrategy[TurnContext] | None = None,
    max_batch: int = 6,
    deterministic: bool = False,
    settings: Settings | None = None,
) -> None:
    """Check that ``agent.act(batch)`` returns one legal Action per context, in order, never
    raises, and reports its costs (a speaking action: >= 1 model call; no negative counts), for
    batches of 1..``max_batch`` contexts drawn from ``contexts`` (default: every registered game
    and role, some with odd problems). ``deterministic=True`` also requires each action not to
    depend on the rest of the batch (acting on a context alone gives the same)."""
    if not callable(getattr(agent, "act", None)):
        raise TypeError(f"check_agent: {type(agent).__name__} has no act(contexts) (the Agent protocol)")
    name = f"check_agent({getattr(agent, 'name', type(agent).__name__)})"
    contexts = _contexts_with_odd_problems() if contexts is None else contexts
    batches = st.lists(contexts, min_size=1, max_size=max_batch).map(_Batch)

    @_settings(settings)
    @given(batches)
    def contracts(batch: _Batch) -> None:
        try:
            acted = agent.act(list(batch))
        except Exception as err:  # noqa: BLE001 - an agent must not raise on a well-formed batch
            _fail(name, "act raised", f"{type(err).__name__}: {err}", batch)
        acted = list(acted) if acted is not None else []
        if len(acted) != len(batch):
            _fail(
                name,
                "not one action per context",
                f"returned {len(acted)} actions for a batch of {len(batch)} contexts",
                batch,
            )
        for i, (context, action) in enumerate(zip(batch, acted, strict=True)):
            _check_action(name, i, context, action, batch)
            if deterministic:
                alone = agent.act([context])[0]
                if alone != action:
                    _fail(
                        name,
                        "action depends on the rest of the batch",
                        f"context {i}: in the batch {action!r}, alone {alone!r}",
                        batch,
                    )

    contracts()


def _check_action(name: str, i: int, context: TurnContext, action: Any, batch: _Batch) -> None:
    if not isinstance(action, Action):
        _fail(
            name,
            "not an Action",
            f"context {i}: got {type(action).__name__} {action!r}; agents return Action(mode, ...) (a game's "
            "step alone also takes a plain int or a dict, for play by hand)",
            batch,
        )
    try:
        action = as_action(action, context.agent)
    except (TypeError, ValueError) as err:
        _fail(name, "not a valid Action", f"context {i}: {err}", batch)
    if action.mode not in context.legal_modes:
        _fail(
            name,
            "illegal mode (or actions out of order)",
            f"action {i} has mode {action.mode.name}; context {i} allows "
            f"{[Mode(m).name for m in context.legal_modes]}",
            batch,
        )
    counts = (action.calls, action.prompt_tokens, action.completion_tokens)
    if any(not isinstance(c, (int, np.integer)) or c < 0 for c in counts):
        _fail(name, "costs must be non-negative ints", f"action {i}: calls, tokens = {counts}", batch)
    if action.mode not in SILENT_MODES and action.calls < 1:  # tokens: 0 where a backend counts none
        _fail(
            name,
            "a speaking action does not report its cost",
            f"action {i} ({action.mode.name}): calls={action.calls}, tokens="
            f"{action.prompt_tokens}+{action.completion_tokens}",
            batch,
        )
