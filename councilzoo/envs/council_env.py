"""The shared base of every councilzoo game: problems, spaces, the typed transcript, costs, outcome.

A game subclasses :class:`CouncilEnv` and supplies its rules through six hooks (``_start``,
``_legal``, ``_advance``, ``_features``, ``_outcome`` and optionally ``_parse`` /
``_turn_role`` / ``_extras``); everything else (action coercion, illegal-mode errors,
sanitising and truncating utterances, cost accounting, grading, rewards, observations, the
episode record and the ansi render) lives here once. The parallel cohort game reuses the
module-level pieces (:class:`ProblemDeck`, :func:`build_spaces`, :func:`as_action`,
:func:`make_turn`). The settings every game shares (``problems``, ``lam``, ``cost_unit``,
``max_utterance_chars``, ``render_mode``) are declared once, as :class:`TableSettings`: a game
takes them as ``**table: Unpack[TableSettings]`` beside its own arguments and hands them to
``CouncilEnv.__init__``.

Actions. ``step`` accepts an :class:`~councilzoo.envs.types.Action`, a plain ``int`` /
``np.integer`` (the mode alone, empty utterance: what PettingZoo's test suites sample from the
``Discrete(NUM_MODES)`` action space) or a dict with Action's field names.

Problems. ``problems=`` is any iterable of :class:`~councilzoo.tasks.Problem` (a loaded dataset
is a list of them). ``reset(seed=s)`` shuffles the deck with ``numpy.random.default_rng(s)`` and
starts from its top; each later ``reset()`` without a seed deals the next problem (cycling).
Before any seed the deck is in the given order. ``options={"problem_index": i}`` or
``options={"problem": Problem}`` pins one problem for that episode; other option keys are ignored.
A seed must be an integer >= 0 (anything else is a ValueError naming the seed).

Rendering. ``render_mode="ansi"``: ``render()`` returns the episode as text; ``"human"``: it
prints that text to stdout and returns None.
"""

from __future__ import annotations

import functools
import string
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import asdict, replace
from typing import Any, TypedDict

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from councilzoo.envs.types import (
    NUM_MODES,
    SILENT_MODES,
    Action,
    Cost,
    EpisodeRecord,
    Mode,
    Turn,
    TurnContext,
)
from councilzoo.tasks import Problem, answers_equivalent, extract_answer, extract_verdict, stated_answer

__all__ = [
    "MAX_UTTERANCE_CHARS", "MAX_TRANSCRIPT_CHARS", "VERDICTS", "RENDER_MODES", "IllegalModeError",
    "to_printable", "as_action", "make_turn", "check_count", "check_render_mode", "show", "build_spaces",
    "ProblemDeck", "team_reward", "grade", "render_problem", "render_turn", "TableSettings", "CouncilEnv",
]

MAX_UTTERANCE_CHARS = 8_000  # longer utterances are cut here and the turn marked truncated
MAX_TRANSCRIPT_CHARS = 32_000  # length of the observation's Text space
COST_UNITS = ("calls", "tokens")
VERDICTS = ("RIGHT", "WRONG")
RENDER_MODES = ("ansi", "human")
_PRINTABLE = frozenset(string.printable)
# Control characters other than the whitespace in string.printable are dropped from utterances.
_DROP_CONTROL = {c: None for c in range(32) if chr(c) not in _PRINTABLE} | {127: None}
_DROP_CONTROL_BYTES = bytes(sorted(_DROP_CONTROL))


def _drop_control(text: str) -> str:
    """``text`` without the control characters in ``_DROP_CONTROL``.

    ASCII text (the common case) goes through ``bytes.translate``, several times faster than
    ``str.translate`` with a mapping; both give the same string.
    """
    if text.isascii():
        return text.encode("ascii").translate(None, _DROP_CONTROL_BYTES).decode("ascii")
    return text.translate(_DROP_CONTROL)


class IllegalModeError(ValueError):
    """An agent chose a mode its role and phase do not allow."""


def _sanitize(text: str, limit: int) -> tuple[str, bool]:
    """``text`` without control characters, cut to ``limit`` characters; and whether it was cut."""
    clean = _drop_control(text)
    if len(clean) > limit:
        return clean[:limit], True
    return clean, False


def to_printable(text: str) -> str:
    """ASCII rendering for the observation's ``Text`` space (non-ASCII becomes ``\\uXXXX``)."""
    if not text.isascii():
        text = text.encode("ascii", "backslashreplace").decode("ascii")
    return _drop_control(text)


def as_action(action: Any, agent: str) -> Action:
    """Coerce what ``step`` received into an :class:`Action`, or raise naming the agent."""
    if isinstance(action, Action) and isinstance(action.mode, Mode):
        return action  # already typed (what agents send)
    if isinstance(action, Action):
        mode = action.mode
    elif isinstance(action, (int, np.integer)) and not isinstance(action, bool):
        mode, action = int(action), None
    elif isinstance(action, dict):
        unknown = set(action) - set(Action.__dataclass_fields__)
        if unknown or "mode" not in action:
            raise ValueError(
                f"action dict for agent {agent!r} needs 'mode' and only Action fields "
                f"{sorted(Action.__dataclass_fields__)}; got keys {sorted(action)}"
            )
        mode = action["mode"]
    else:
        raise TypeError(
            f"action for agent {agent!r} must be an Action, an int mode or a dict; "
            f"got {type(action).__name__}"
        )
    try:
        mode = Mode(int(mode))
    except (TypeError, ValueError):
        raise ValueError(
            f"agent {agent!r} sent mode {mode!r}; modes are {[f'{m.name}={int(m)}' for m in Mode]}"
        ) from None
    if action is None:
        return Action(mode)
    if isinstance(action, dict):
        return Action(**{**action, "mode": mode, "samples": tuple(action.get("samples", ()))})
    return action if action.mode is mode else replace(action, mode=mode)


def make_turn(
    agent: str, role: str, round_: int, action: Action, *, limit: int, problem: Problem, verdict_role: bool
) -> Turn:
    """The transcript entry for ``action``: sanitised text, parsed answer or verdict, its cost.

    Speaking turns parse ``text`` unless the agent pre-parsed ``answer`` / ``verdict``; a code
    answer (a program) becomes its output signature, so turns compare and grade by what the
    programs output. An agent that reports no calls on a speaking turn is charged one call per
    text it produced.
    """
    text, cut = _sanitize(action.text or "", limit)
    text_cut = cut = cut or bool(action.truncated)  # at the character or the token limit
    flags = action.samples_truncated or (False,) * len(action.samples)
    if len(flags) != len(action.samples):
        raise ValueError(
            f"agent {agent!r} sent {len(flags)} samples_truncated flags for {len(action.samples)} samples"
        )
    samples, samples_cut = [], []
    for sample, token_cut in zip(action.samples, flags, strict=True):
        clean, sample_cut = _sanitize(sample or "", limit)
        samples.append(clean)
        samples_cut.append(sample_cut or bool(token_cut))
    cut = cut or any(samples_cut)
    answer = verdict = None
    speaking = action.mode not in SILENT_MODES
    if speaking and verdict_role:
        verdict = action.verdict.upper() if action.verdict else extract_verdict(text)
        if verdict is not None and verdict not in VERDICTS:
            raise ValueError(f"agent {agent!r} sent verdict {action.verdict!r}; expected one of {VERDICTS}")
    elif speaking:
        answer = action.answer
        if answer is None:
            answer = extract_answer(text, problem.kind, truncated=text_cut)
        answer = stated_answer(problem, answer)
    calls = action.calls or (max(1, len(samples)) if speaking else 0)
    cost = Cost(calls, int(action.prompt_tokens), int(action.completion_tokens))
    return Turn(
        agent, role, round_, action.mode, text, answer, verdict, cost, cut, tuple(samples),
        tuple(samples_cut) if any(samples_cut) else (),
    )


def check_count(game: str, name: str, value: Any, minimum: int) -> None:
    """A game's argument that counts something (agents, rounds, samples): a ValueError naming the
    game and the argument unless ``value`` is a whole number >= ``minimum``."""
    if int(value) != value or value < minimum:
        raise ValueError(f"{game}: {name} must be an integer >= {minimum}, got {value!r}")


def check_render_mode(render_mode: str | None) -> None:
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(f"render_mode must be None or one of {list(RENDER_MODES)}, got {render_mode!r}")


def show(text: str, render_mode: str) -> str | None:
    """What ``render()`` gives in ``render_mode``: the text (ansi), or None after printing it (human)."""
    if render_mode == "human":
        print(text)
        return None
    return text


def build_spaces(num_features: int, max_chars: int) -> tuple[spaces.Dict, spaces.Discrete]:
    """The observation and action spaces every councilzoo game shares (built once per env)."""
    observation = spaces.Dict(
        {
            "transcript": spaces.Text(max_chars, min_length=1, charset=string.printable),
            "action_mask": spaces.Box(0, 1, (NUM_MODES,), np.int8),
            "features": spaces.Box(-np.inf, np.inf, (num_features,), np.float32),
        }
    )
    return observation, spaces.Discrete(NUM_MODES)


@functools.lru_cache(maxsize=1)
def _default_problems() -> tuple[Problem, ...]:
    """The default deck, generated once per process (envs are built by the hundred in rollouts)."""
    from councilzoo.tasks import synthetic_problems

    return tuple(synthetic_problems("numeric", 100, seed=0))


class ProblemDeck:
    """Deals one problem per episode, reproducibly (see the module docstring)."""

    def __init__(self, problems: Iterable[Problem] | None) -> None:
        self.problems = list(_default_problems() if problems is None else problems)
        if not self.problems:
            raise ValueError("problems is empty; expected at least one Problem")
        for i, problem in enumerate(self.problems):
            if not isinstance(problem, Problem):
                raise TypeError(f"problems[{i}] is a {type(problem).__name__}; expected a councilzoo Problem")
        self.order = np.arange(len(self.problems))
        self.position = 0

    def deal(self, seed: int | None, options: dict | None) -> Problem:
        options = options or {}
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise ValueError(f"reset: seed must be None or an integer >= 0, got {seed!r}")
            self.order = np.random.default_rng(seed).permutation(len(self.problems))
            self.position = 0
        if "problem" in options:
            if not isinstance(options["problem"], Problem):
                raise TypeError(
                    f"options['problem'] must be a Problem, got {type(options['problem']).__name__}"
                )
            return options["problem"]
        if "problem_index" in options:
            index = int(options["problem_index"])
            if not 0 <= index < len(self.problems):
                raise IndexError(f"options['problem_index']={index} outside 0..{len(self.problems) - 1}")
            return self.problems[index]
        problem = self.problems[self.order[self.position % len(self.order)]]
        self.position += 1
        return problem


def _check_cost_args(lam: float, cost_unit: str) -> None:
    if cost_unit not in COST_UNITS:
        raise ValueError(f"cost_unit must be one of {COST_UNITS}, got {cost_unit!r}")
    if not np.isfinite(lam) or lam < 0:
        raise ValueError(f"lam (cost weight) must be a finite number >= 0, got {lam!r}")


def team_reward(correct: bool | None, cost: Cost, lam: float, cost_unit: str) -> float:
    """Terminal team reward: correctness (1/0; 0 when ungraded) minus ``lam`` times the cost."""
    spent = cost.calls if cost_unit == "calls" else cost.tokens
    return float(bool(correct)) - lam * spent


def grade(answer: str | None, problem: Problem) -> bool | None:
    """Correctness of ``answer`` for ``problem``; None for an unlabeled problem."""
    if problem.answer is None:
        return None
    return answers_equivalent(answer, problem.answer, problem.kind)


def render_problem(problem: Problem) -> str:
    """The problem as observation text; images appear as numbered placeholders (the pixels are in
    ``turn_context(agent).images``)."""
    lines = [f"Question: {problem.question}"]
    lines += [f"({chr(65 + i)}) {choice}" for i, choice in enumerate(problem.choices)]
    if problem.images:
        lines.append("Images: " + " ".join(f"<image {i + 1}>" for i in range(len(problem.images))))
    return "\n".join(lines)


def render_turn(turn: Turn) -> str:
    head = f"[r{turn.round}] {turn.agent} ({turn.role}) {turn.mode.name}"
    tags = []
    if turn.answer is not None:
        tags.append(f"answer={turn.answer}")
    if turn.verdict is not None:
        tags.append(f"verdict={turn.verdict}")
    if turn.samples:
        tags.append(f"{len(turn.samples)} samples")
    if turn.truncated:
        tags.append("truncated")
    head += f" [{', '.join(tags)}]" if tags else ""
    return f"{head}: {turn.text}" if turn.text else head


class TableSettings(TypedDict, total=False):
    """What every turn-based game takes beside its own rules and hands to ``CouncilEnv`` unchanged:
    keyword-only and each optional, with ``CouncilEnv``'s defaults. A game declares them as
    ``**table: Unpack[TableSettings]``, so they are written once, here."""

    problems: Iterable[Problem] | None  # the problems dealt (default: 100 synthetic numeric problems)
    lam: float  # cost weight of the team reward (default 0.0)
    cost_unit: str  # "calls" (default) or "tokens"
    max_utterance_chars: int  # longer utterances are cut and marked truncated (default 8,000)
    render_mode: str | None  # None (default), "ansi" or "human"


class CouncilEnv(AECEnv, ABC):
    """AEC base of the turn-based games; subclasses define the rules through the hooks below."""

    metadata: dict[str, Any] = {
        "name": "council", "render_modes": list(RENDER_MODES), "is_parallelizable": False
    }
    env_id = "councilzoo/council-v0"
    FEATURE_NAMES: tuple[str, ...] = ()
    VERDICT_ROLES = frozenset({"reviewer"})

    def __init__(
        self,
        *,
        possible_agents: list[str],
        roles: dict[str, str],
        problems: Iterable[Problem] | None = None,
        lam: float = 0.0,
        cost_unit: str = "calls",
        max_utterance_chars: int = MAX_UTTERANCE_CHARS,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        _check_cost_args(lam, cost_unit)
        check_render_mode(render_mode)
        if max_utterance_chars < 1:
            raise ValueError(f"max_utterance_chars must be >= 1, got {max_utterance_chars}")
        self.possible_agents = list(possible_agents)
        self.roles = dict(roles)
        self.deck = ProblemDeck(problems)
        self.lam, self.cost_unit = float(lam), cost_unit
        self.max_utterance_chars = max_utterance_chars
        self.render_mode = render_mode
        self.env_index = 0  # set by rollout engines that batch many envs
        self._observation_space, self._action_space = build_spaces(
            len(self.FEATURE_NAMES), MAX_TRANSCRIPT_CHARS
        )
        self._record: EpisodeRecord | None = None

    # ---- hooks -------------------------------------------------------------------------------
    @abstractmethod
    def _start(self) -> None:
        """Initialise the game state for ``self.problem`` and set ``agent_selection``."""
        raise NotImplementedError

    @abstractmethod
    def _legal(self, agent: str) -> tuple[Mode, ...]:
        """Modes ``agent`` may choose now (empty when it is not its turn)."""
        raise NotImplementedError

    @abstractmethod
    def _advance(self, turn: Turn) -> bool:
        """Apply ``turn`` (already appended to the transcript); select the next agent or return True
        when the game is over."""
        raise NotImplementedError

    @abstractmethod
    def _features(self, agent: str) -> np.ndarray:
        raise NotImplementedError

    @abstractmethod
    def _outcome(self) -> tuple[str | None, dict[str, Any], dict[str, dict[str, Any]]]:
        """(final answer, episode info, per-agent info) once the game is over."""
        raise NotImplementedError

    def _round(self) -> int:
        return self._round_no

    def _turn_role(self, agent: str) -> str:
        return self.roles[agent]

    def _extras(self, agent: str) -> dict[str, Any]:
        return {}

    def _parse(self, agent: str, action: Action) -> Turn:
        return make_turn(
            agent,
            self._turn_role(agent),
            self._round(),
            action,
            limit=self.max_utterance_chars,
            problem=self.problem,
            verdict_role=self._turn_role(agent) in self.VERDICT_ROLES,
        )

    # ---- PettingZoo API ----------------------------------------------------------------------
    def observation_space(self, agent: str) -> spaces.Dict:
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._action_space

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.problem: Problem = self.deck.deal(seed, options)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict] = {a: {} for a in self.agents}
        self.transcript: list[Turn] = []
        self.costs = {a: Cost() for a in self.possible_agents}
        self._round_no = 1
        self._visible_len: int | None = None  # games with simultaneous rounds hide the current round
        self._text_cache: dict[int, str] = {}
        self._header = to_printable(render_problem(self.problem))[: MAX_TRANSCRIPT_CHARS // 4]
        self._lines: list[str] = []
        self._record = None
        self._start()

    def legal_modes(self, agent: str) -> tuple[Mode, ...]:
        return () if self.terminations.get(agent, True) else self._legal(agent)

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        act = as_action(action, agent)
        legal = self._legal(agent)
        if act.mode not in legal:
            raise IllegalModeError(
                f"agent {agent!r} (role {self._turn_role(agent)!r}, round {self._round()}) chose mode "
                f"{act.mode.name}; legal modes now: {[m.name for m in legal]}"
            )
        turn = self._parse(agent, act)
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        self.transcript.append(turn)
        self.costs[agent].add(turn.cost)
        if self._advance(turn):
            self._finish()
        self._accumulate_rewards()

    def forfeit(self, agent: str, reward: float) -> None:
        """End the episode now: ``agent`` gets ``reward``, the others 0 (used by IllegalModePenalty)."""
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        self.rewards[agent] = float(reward)
        self._record = EpisodeRecord(
            self.env_id,
            self.problem.id,
            None,
            None,
            float(reward),
            self.total_cost(),
            {a: c.copy() for a, c in self.costs.items()},
            list(self.transcript),
            {"forfeit": agent},
            self.problem.images,
        )
        for a in self.agents:
            self.terminations[a] = True
            self.infos[a] = {"forfeit": agent}
        self._accumulate_rewards()

    def _finish(self) -> None:
        final, info, per_agent = self._outcome()
        correct = grade(final, self.problem)
        cost = self.total_cost()
        reward = team_reward(correct, cost, self.lam, self.cost_unit)
        info = {"final_answer": final, "correct": correct, **info}
        spent = asdict(cost)
        self._record = EpisodeRecord(
            self.env_id,
            self.problem.id,
            final,
            correct,
            reward,
            cost,
            {a: c.copy() for a, c in self.costs.items()},
            list(self.transcript),
            info,
            self.problem.images,
        )
        for a in self.agents:
            self.rewards[a] = reward
            self.terminations[a] = True
            self.infos[a] = {**info, "cost": dict(spent), **per_agent.get(a, {})}

    def observe(self, agent: str) -> dict[str, np.ndarray | str]:
        mask = np.zeros(NUM_MODES, np.int8)
        for mode in self.legal_modes(agent):
            mask[mode] = 1
        return {"transcript": self._transcript_text(), "action_mask": mask, "features": self._features(agent)}

    def _visible(self) -> list[Turn]:
        return self.transcript if self._visible_len is None else self.transcript[: self._visible_len]

    def _transcript_text(self) -> str:
        n = len(self.transcript) if self._visible_len is None else self._visible_len
        text = self._text_cache.get(n)
        if text is None:
            while len(self._lines) < n:  # each turn is rendered once
                self._lines.append(to_printable(render_turn(self.transcript[len(self._lines)])))
            body = "\n".join(self._lines[:n])
            room = MAX_TRANSCRIPT_CHARS - len(self._header) - 1
            body = body if len(body) <= room else "..." + body[len(body) - room + 3 :]
            text = f"{self._header}\n{body}" if body else self._header
            self._text_cache = {n: text}
        return text

    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        lines = [
            f"== {self.env_id} | problem {self.problem.id} | round {self._round()} ==",
            render_problem(self.problem),
        ]
        lines += [render_turn(t) for t in self.transcript]
        total = self.total_cost()
        lines.append(f"cost: {total.calls} calls, {total.prompt_tokens}+{total.completion_tokens} tokens")
        if self._record is not None:
            r = self._record
            lines.append(f"final answer: {r.final_answer} | correct: {r.correct} | reward: {r.reward:.3f}")
        else:
            lines.append(f"next: {self.agent_selection} ({self._turn_role(self.agent_selection)})")
        return show("\n".join(lines), self.render_mode)

    def close(self) -> None:
        pass

    # ---- councilzoo API ----------------------------------------------------------------------
    def total_cost(self) -> Cost:
        total = Cost()
        for cost in self.costs.values():
            total.add(cost)
        return total

    def turn_context(self, agent: str) -> TurnContext:
        """The rich view of ``agent`` now: problem, role, round, visible transcript, legal modes."""
        return self._context(agent, self.legal_modes(agent))

    def upcoming_turns(self) -> list[TurnContext]:
        """The turns that can be played now, in turn order, each as its agent will see it: the
        agent on turn, and in a simultaneous round every later agent of the round (nothing it
        sees changes before it acts). The rollout engine plays them in one tick, then steps them
        one by one."""
        together = self._simultaneous_agents()
        if not together or self.terminations[self.agent_selection]:
            return [self.turn_context(self.agent_selection)]
        legal = self.legal_modes(self.agent_selection)  # a round's modes are the same for all
        return [self._context(agent, legal) for agent in together]

    def _simultaneous_agents(self) -> list[str]:
        """The agent on turn and every later agent of its simultaneous round; [] where turns are
        sequential (games with simultaneous rounds override this)."""
        return []

    def _context(self, agent: str, legal: tuple[Mode, ...]) -> TurnContext:
        return TurnContext(
            self.env_index,
            agent,
            self._turn_role(agent),
            self._round(),
            self.problem,
            tuple(self._visible()),
            legal,
            self._features(agent),
            self._extras(agent),
        )

    def episode_record(self) -> EpisodeRecord:
        """The finished episode; raises if the game is still running."""
        if self._record is None:
            raise RuntimeError(f"{self.env_id}: episode_record() is available only after the episode ends")
        return self._record
