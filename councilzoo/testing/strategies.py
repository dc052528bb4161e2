"""Hypothesis strategies for testing agents, controllers and games against councilzoo's contracts.

- ``problems()``: problems of every kind (numeric, math, multiple choice, code, with images), the
  synthetic generators' items and odd hand-made ones (unicode, empty or huge questions, no
  metadata, odd images);
- ``model_texts(problem)``: what a model may write: well-formed answers and verdicts, programs,
  and garbage (any unicode, control characters, texts past the utterance limit);
- ``actions(context)``: an ``Action`` with a mode legal in ``context`` and such a text;
- ``episodes(env)``: a whole episode of a game played by random legal actions, as an
  ``Episode`` that prints as the list of its moves (a shrunk counterexample reads as one);
- ``turn_contexts(env, roles)``: the ``TurnContext`` some agent sees at some point of such an
  episode, optionally of given roles (play is steered until one comes up);
- ``agents_configs()``: agents configs (the mapping an agents YAML file holds) over simulated
  models, as ``councilzoo eval`` loads them.

``env`` is a registered id (``"councilzoo/debate-v0"``), or a zero-argument callable returning
a fresh AEC env that has ``turn_context(agent)``. Every strategy draws everything through
hypothesis, so failures shrink and replay.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from PIL import Image

from councilzoo.envs import GAMES, make
from councilzoo.envs.council_env import MAX_UTTERANCE_CHARS
from councilzoo.envs.types import Action, EpisodeRecord, Mode, TurnContext
from councilzoo.tasks import Problem, format_answer, synthetic_problems
from councilzoo.tasks.synthetic import TASKS
from councilzoo.testing import profiles  # noqa: F401 - registers councilzoo-ci and councilzoo-deep
from councilzoo.testing.gates import GateCase, GateSignals, gate_outcomes, gate_signals
from councilzoo.testing.learners import Poison, poisons
from councilzoo.testing.regret import UtilitySequence, controller_games, normal_form_games, utility_sequences

SAMPLING_ROLES = frozenset({"anchor", "member"})  # roles whose turn may carry several samples
MAX_STEPS = 10_000  # an episode longer than this is reported as one that never ends

__all__ = [
    "Episode",
    "GateCase",
    "GateSignals",
    "Poison",
    "Step",
    "UtilitySequence",
    "actions",
    "agents_configs",
    "controller_games",
    "env_factory",
    "episodes",
    "games",
    "gate_outcomes",
    "gate_signals",
    "images",
    "model_texts",
    "normal_form_games",
    "poisons",
    "problems",
    "turn_contexts",
    "utility_sequences",
]


def env_factory(env: str | Callable[[], Any], **kwargs: Any) -> Callable[[], Any]:
    """A zero-argument constructor of fresh envs from an id (with ``kwargs``) or a callable."""
    if isinstance(env, str):
        make(env, **kwargs)  # an unknown id or keyword fails here, before any drawing
        return partial(make, env, **kwargs)
    if not callable(env):
        raise TypeError(
            f"env must be a registered id or a callable returning an env, got {type(env).__name__}"
        )
    return partial(env, **kwargs) if kwargs else env


def games() -> st.SearchStrategy[str]:
    """The id of any registered councilzoo game."""
    return st.sampled_from(sorted(GAMES))


# ---- problems ----------------------------------------------------------------------------------
def images() -> st.SearchStrategy[Image.Image]:
    """Small PIL images of any common mode and odd sizes (1x1 up to 48x48), filled with one colour."""
    return st.builds(
        lambda mode, w, h, v: Image.new(mode, (w, h), v if mode in ("L", "P") else (v,) * len(mode)),
        st.sampled_from(["RGB", "RGBA", "L", "P"]),
        st.integers(1, 48),
        st.integers(1, 48),
        st.integers(0, 255),
    )


def _synthetic(kinds: Sequence[str]) -> st.SearchStrategy[Problem]:
    return st.builds(
        lambda kind, seed, difficulty: synthetic_problems(kind, 1, seed, difficulty)[0],
        st.sampled_from(list(kinds)),
        st.integers(0, 2**16),
        st.floats(0.0, 1.0),
    )


@st.composite
def _odd(draw, kinds: Sequence[str], labeled: bool) -> Problem:
    """A hand-made problem: any question text, no metadata, sometimes odd images or choices."""
    kind = draw(st.sampled_from([k for k in kinds if k in ("numeric", "math", "multiple_choice")]))
    question = draw(st.one_of(st.text(), st.text(min_size=1).map(lambda t: t * 2000)))
    choices: tuple[str, ...] = ()
    if kind == "multiple_choice":
        choices = tuple(draw(st.lists(st.text(max_size=30), min_size=2, max_size=6)))
        answer = "ABCDEF"[draw(st.integers(0, len(choices) - 1))]
    elif kind == "math":
        answer = draw(st.sampled_from(["1/2", "\\frac{3}{4}", "2\\sqrt{2}", "x^2 + 1", "-7"]))
    else:
        answer = str(
            draw(st.one_of(st.integers(-(10**12), 10**12), st.floats(allow_nan=False, allow_infinity=False)))
        )
    pictures = tuple(draw(st.lists(images(), max_size=2)))
    return Problem(
        f"odd-{kind}", question, answer if labeled else None, kind, choices, "hypothesis", {}, pictures
    )


def problems(
    kinds: Sequence[str] = TASKS, *, odd: bool = True, labeled: bool = True
) -> st.SearchStrategy[Problem]:
    """Problems of ``kinds`` (any of ``KINDS`` and ``"visual"``: a synthetic problem with an image):
    seeded synthetic items, and with ``odd`` hand-made ones too (numeric, math, multiple choice;
    unicode or huge questions, no metadata, images of odd modes and sizes). ``labeled=False``
    removes the gold answer, as unlabeled data has none."""
    unknown = sorted(set(kinds) - set(TASKS))
    if unknown:
        raise ValueError(f"problems: unknown kinds {unknown}; known: {list(TASKS)}")
    strategy = _synthetic(kinds)
    if odd and set(kinds) & {"numeric", "math", "multiple_choice"}:
        strategy = st.one_of(strategy, _odd(kinds, labeled))
    if not labeled:
        strategy = strategy.map(lambda p: Problem(**{**p.__dict__, "answer": None}))
    return strategy


# ---- model output and actions ------------------------------------------------------------------
def model_texts(problem: Problem | None = None) -> st.SearchStrategy[str]:
    """What a model may write: garbage (any unicode with control characters, or a text past the
    utterance limit), verdicts, boxed numbers, and for ``problem`` its gold answer and
    distractors in the answer format graders read."""
    stated = [st.integers(-1000, 1000).map(lambda n: f"The answer is \\boxed{{{n}}}.")]
    if problem is not None:
        known = [problem.answer] if problem.answer is not None else []
        known += [str(d) for d in problem.metadata.get("distractors", ())]
        if problem.kind == "code" and problem.metadata.get("solution"):
            known.append(problem.metadata["solution"])
        if known:
            stated.append(st.sampled_from(known).map(lambda a: f"So: {format_answer(a, problem.kind)}"))
    return st.one_of(
        st.text(),
        st.builds(
            lambda c, n: c * n,
            st.characters(),
            st.integers(MAX_UTTERANCE_CHARS - 2, MAX_UTTERANCE_CHARS + 50),
        ),
        st.sampled_from(["Verdict: RIGHT", "Verdict: WRONG", "RIGHT and WRONG", "```python\n```", ""]),
        *stated,
    )


@st.composite
def actions(draw, context: TurnContext, modes: Sequence[Mode] | None = None) -> Action:
    """An Action for ``context``: a mode from ``modes`` (default its legal modes), a text from
    ``model_texts``, several samples for sampling roles, any token counts and calls (0 lets the
    game charge its default)."""
    modes = list(context.legal_modes if modes is None else modes)
    if not modes:
        raise ValueError(f"actions: agent {context.agent!r} has no legal mode to draw from")
    mode = Mode(draw(st.sampled_from(modes)))
    texts = model_texts(context.problem)
    samples = tuple(draw(st.lists(texts, max_size=4))) if context.role in SAMPLING_ROLES else ()
    text = samples[0] if samples else draw(texts)
    return Action(
        mode,
        text,
        samples=samples,
        verdict=draw(st.sampled_from([None, None, "RIGHT", "WRONG", "right"])),
        prompt_tokens=draw(st.integers(0, 100_000)),
        completion_tokens=draw(st.integers(0, 100_000)),
        calls=draw(st.integers(0, 4)),
    )


# ---- episodes ----------------------------------------------------------------------------------
def shorten(text: str, limit: int = 60) -> str:
    """``repr(text)``, or for a long text the repr of its start and its length."""
    return repr(text) if len(text) <= limit else f"{text[: limit - 20]!r}... ({len(text)} chars)"


@dataclass
class Step:
    """One agent-step: what the agent observed and saw, and what it did."""

    agent: str
    observation: Any
    context: TurnContext
    action: Action

    def __repr__(self) -> str:
        extra = f", {len(self.action.samples)} samples" if self.action.samples else ""
        return (
            f"{self.agent} ({self.context.role}, round {self.context.round}): {self.action.mode.name} "
            f"{shorten(self.action.text)}{extra}, calls={self.action.calls}"
        )


@dataclass
class Episode:
    """A played episode: the env's name, the reset seed, every step, each agent's return (the
    rewards it read from ``last()``), the record, and the env at the end."""

    name: str
    seed: int
    steps: list[Step]
    returns: dict[str, float]
    record: EpisodeRecord | None
    env: Any = field(repr=False)
    ended: bool = True

    @property
    def actions(self) -> list[Action]:
        return [s.action for s in self.steps]

    def __repr__(self) -> str:
        moves = "".join(f"\n  {i}. {s!r}" for i, s in enumerate(self.steps))
        outcome = (
            ""
            if self.record is None
            else (
                f"\n  -> final answer {self.record.final_answer!r}, correct {self.record.correct}, "
                f"reward {self.record.reward}"
            )
        )
        head = f"Episode({self.name}, reset(seed={self.seed}), {len(self.steps)} steps"
        return f"{head}{':' if moves else ''}{moves}{outcome})"


def mask_modes(observation: Any) -> tuple[Mode, ...] | None:
    """The modes an observation's ``action_mask`` allows, or None when it has no mask."""
    if isinstance(observation, dict) and "action_mask" in observation:
        return tuple(Mode(int(i)) for i in np.flatnonzero(observation["action_mask"]))
    return None


def env_name(env: Any) -> str:
    return getattr(env.unwrapped, "env_id", None) or env.metadata.get("name", type(env).__name__)


def play(
    env: Any, seed: int, choose: Callable[[Any, TurnContext, Any], Action], max_steps: int = MAX_STEPS
) -> Episode:
    """Play one AEC episode of ``env`` from ``reset(seed)``, ``choose(env, context, obs)`` giving
    each action; at most ``max_steps`` agent-steps."""
    env.reset(seed=seed)
    steps: list[Step] = []
    returns = dict.fromkeys(env.possible_agents, 0.0)
    for agent in env.agent_iter(max_steps * (len(env.possible_agents) + 1)):
        obs, reward, termination, truncation, _ = env.last()
        returns[agent] += float(reward)
        if termination or truncation:
            env.step(None)
            continue
        if len(steps) >= max_steps:
            break
        context = env.turn_context(agent)
        action = choose(env, context, obs)
        steps.append(Step(agent, obs, context, action))
        env.step(action)
    ended = not env.agents
    record = env.episode_record() if ended and hasattr(env, "episode_record") else None
    return Episode(env_name(env), seed, steps, returns, record, env, ended)


def _reaches(env: Any, roles: frozenset[str], budget: list[int]) -> bool:
    """Whether some sequence of modes (texts empty) from ``env``'s state gives a turn to ``roles``;
    a depth-first search over deep copies, ``budget[0]`` copies at most."""
    if not env.agents:
        return False
    context = env.turn_context(env.agent_selection)
    if context.role in roles:
        return True
    for mode in context.legal_modes:
        if budget[0] <= 0:
            return False
        budget[0] -= 1
        twin = copy.deepcopy(env)
        twin.step(Action(mode))
        _skip_dead(twin)
        if _reaches(twin, roles, budget):
            return True
    return False


def _skip_dead(env: Any) -> None:
    while env.agents and (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
        env.step(None)


def _steered(draw, roles: frozenset[str] | None, reached: list[bool]):
    """``choose`` for ``play``: a drawn action whose mode comes from the observation's mask (the
    context's legal modes without one); while no turn of ``roles`` has come up, only modes from
    which one can still come up."""

    def choose(env: Any, context: TurnContext, obs: Any) -> Action:
        modes = mask_modes(obs)
        modes = list(context.legal_modes if modes is None else modes)
        reached[0] = reached[0] or (roles is not None and context.role in roles)
        if roles is not None and not reached[0] and len(modes) > 1:
            hopeful = []
            for mode in modes:
                twin = copy.deepcopy(env)
                twin.step(Action(mode))
                _skip_dead(twin)
                if _reaches(twin, roles, [64]):
                    hopeful.append(mode)
            modes = hopeful or modes
        return draw(actions(context, modes))

    return choose


@st.composite
def episodes(
    draw, env: str | Callable[[], Any] = "councilzoo/debate-v0", *, max_steps: int = MAX_STEPS, **kwargs: Any
) -> Episode:
    """A whole episode of ``env`` (an id with ``kwargs``, or a factory) from a drawn reset seed,
    every action drawn by ``actions`` with a mode the observation's mask allows."""
    factory = env_factory(env, **kwargs)
    seed = draw(st.integers(0, 2**16))
    return play(factory(), seed, _steered(draw, None, [False]), max_steps)


@st.composite
def turn_contexts(
    draw, env: str | Callable[[], Any] | None = None, roles: Sequence[str] | None = None, **kwargs: Any
) -> TurnContext:
    """A TurnContext an agent of ``env`` (default: any registered game) sees at some point of a
    randomly played episode (the n-th turn of ``roles``, n drawn; play is steered towards
    ``roles`` and stops there, so a context shrinks towards the first turn); rejected when the
    game never gives ``roles`` a turn."""
    env = env_factory(draw(games()) if env is None else env, **kwargs)()
    wanted = None if roles is None else frozenset(roles)
    env.reset(seed=draw(st.integers(0, 2**16)))
    wait = draw(st.integers(0, 40))
    choose = _steered(draw, wanted, [False])
    last = None
    while env.agents:
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            env.step(None)
            continue
        context = env.turn_context(agent)
        if wanted is None or context.role in wanted:
            last, wait = context, wait - 1
            if wait < 0:
                break
        env.step(choose(env, context, env.observe(agent)))
    assume(last is not None)
    return last


# ---- agents configs ----------------------------------------------------------------------------
@st.composite
def agents_configs(draw, max_models: int = 4) -> dict[str, Any]:
    """An agents config (the mapping of an agents YAML file) over 2..``max_models`` simulated models
    with drawn skills, seeds and correlations, and drawn roles, samples and debate rounds."""
    names = [f"m{i}" for i in range(draw(st.integers(2, max_models)))]
    models = {
        name: {
            "type": "simulated",
            "kwargs": {
                "skill": draw(st.floats(0.0, 1.0)),
                "seed": draw(st.integers(0, 2**16)),
                "correlation": draw(st.floats(0.0, 1.0)),
            },
        }
        for name in names
    }
    peers = draw(st.lists(st.sampled_from(names), min_size=2, max_size=len(names), unique=True))
    return {
        "models": models,
        "anchor": draw(st.sampled_from(names)),
        "peers": peers,
        "verifier": draw(st.sampled_from(names)),
        "samples": draw(st.integers(1, 7)),
        "debate_rounds": draw(st.integers(1, 3)),
    }
