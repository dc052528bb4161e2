"""The data types of every councilzoo game: modes, actions, turns, costs, episode records.

Envs, agents and learners all speak these types, so they live in one small module that imports
nothing heavier than numpy.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import IntEnum
from typing import Any

__all__ = ["Mode", "NUM_MODES", "SILENT_MODES", "Action", "Cost", "Turn", "TurnContext", "EpisodeRecord"]


class Mode(IntEnum):
    """What an agent does on its turn. Each game masks the modes illegal for a role and phase."""

    SKIP = 0      # stay silent (debate peer keeps its answer; reviewer gives no verdict)
    SPEAK = 1     # produce an utterance (debate: new answer; review: a RIGHT/WRONG verdict)
    ANSWER = 2    # answer the question (escalation anchor, probe, verifier, peers)
    ESCALATE = 3  # escalation controller: full deliberation among peers
    ACCEPT = 4    # escalation controller: keep the anchor's answer
    VERIFY = 5    # escalation controller: peer probe, then adjudication
    KEEP = 6      # proposer keeps the pending proposal (no model call)
    REFRESH = 7   # proposer generates a new proposal


NUM_MODES = len(Mode)
SILENT_MODES = frozenset({Mode.SKIP, Mode.KEEP, Mode.ACCEPT, Mode.ESCALATE, Mode.VERIFY})


@dataclass
class Action:
    """An agent's move: what ``Agent.act`` returns, one per context (``check_agent`` holds agents
    to this type). A game's ``step`` also takes a plain int (a mode) or a dict with these keys, for
    driving a game by hand; agents return ``Action`` itself.

    ``text`` is the utterance for speaking modes (``truncated``: cut at the token limit).
    ``samples`` holds extra sampled utterances when a turn draws several (the escalation anchor's
    self-consistency samples); ``text`` is then the one the agent commits to, and
    ``samples_truncated`` (empty, or one flag per sample) marks samples cut at the token limit. ``answer`` /
    ``verdict`` may be pre-parsed by the agent; otherwise the env parses ``text``. Token counts
    and ``calls`` feed cost accounting.
    """

    mode: Mode
    text: str = ""
    samples: tuple[str, ...] = ()
    answer: str | None = None
    verdict: str | None = None  # "RIGHT" | "WRONG" | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    truncated: bool = False  # ``text`` ran into the token limit (its unfinished end states nothing)
    samples_truncated: tuple[bool, ...] = ()  # per sample, as ``truncated``; empty: none was cut


@dataclass
class Cost:
    """Model calls and tokens, per agent or in total."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: Cost) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def copy(self) -> Cost:
        """An independent copy (several times cheaper than ``dataclasses.replace``)."""
        return Cost(self.calls, self.prompt_tokens, self.completion_tokens)


@dataclass
class Turn:
    """One entry of the typed transcript."""

    agent: str
    role: str
    round: int
    mode: Mode
    text: str = ""
    answer: str | None = None
    verdict: str | None = None
    cost: Cost = field(default_factory=Cost)
    truncated: bool = False
    samples: tuple[str, ...] = ()
    samples_truncated: tuple[bool, ...] = ()  # per sample: cut at the character or token limit
    # Filled by the rollout engine for learners; None for silent turns and simulated agents.
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["mode"] = self.mode.name
        return out

    def spoken(self) -> tuple[tuple[str, ...], tuple[bool, ...]]:
        """The texts the turn's answers are read from (its samples, else its text), each with its
        cut flag: a text cut at the limit states nothing from its unfinished end."""
        if self.samples:
            return self.samples, self.samples_truncated or (False,) * len(self.samples)
        return (self.text,), (self.truncated,)


@dataclass
class TurnContext:
    """Everything an agent may look at on its turn (richer than the PettingZoo observation).

    LLM agents render ``problem.question``, ``images`` and ``transcript`` into a prompt; simulated agents may
    read ``problem.answer`` and ``problem.metadata`` to simulate skill; controllers read
    ``features`` (the same vector as ``obs["features"]``) and ``legal_modes``.
    """

    env_index: int
    agent: str
    role: str
    round: int
    problem: Any  # councilzoo.tasks.Problem
    transcript: tuple[Turn, ...]
    legal_modes: tuple[Mode, ...]
    features: Any  # np.ndarray (float32)
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def images(self) -> tuple:
        """The images this turn refers to: the problem's, in the order the observation numbers
        them (``<image 1>``, ...); empty for text problems."""
        return tuple(self.problem.images)


@dataclass
class EpisodeRecord:
    """JSON-serialisable outcome of one episode; what evaluations store and learners consume."""

    env_id: str
    problem_id: str
    final_answer: str | None
    correct: bool | None
    reward: float
    cost: Cost
    cost_by_agent: dict[str, Cost]
    turns: list[Turn]
    info: dict[str, Any] = field(default_factory=dict)
    images: tuple = ()  # the problem's images (PIL images or paths)

    def to_dict(self, image_dir=None) -> dict[str, Any]:
        """JSON form; images as paths (in-memory ones saved as PNG under ``image_dir``, or their
        content hash when it is None; see ``councilzoo.tasks.images``)."""
        from councilzoo.tasks.images import image_ref

        return {
            "env_id": self.env_id,
            "problem_id": self.problem_id,
            "final_answer": self.final_answer,
            "correct": self.correct,
            "reward": self.reward,
            "cost": asdict(self.cost),
            "cost_by_agent": {k: asdict(v) for k, v in self.cost_by_agent.items()},
            "turns": [t.to_dict() for t in self.turns],
            "info": self.info,
            "images": [image_ref(image, image_dir) for image in self.images],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeRecord:
        """Inverse of ``to_dict`` (extra keys such as an episode log's ``episode`` are ignored)."""
        turns = []
        for t in data["turns"]:
            fields = {"mode": Mode[t["mode"]], "cost": Cost(**t["cost"]), "samples": tuple(t["samples"]),
                      "samples_truncated": tuple(t.get("samples_truncated", ()))}  # absent in older logs
            turns.append(Turn(**{**t, **fields}))
        return cls(
            env_id=data["env_id"],
            problem_id=data["problem_id"],
            final_answer=data["final_answer"],
            correct=data["correct"],
            reward=data["reward"],
            cost=Cost(**data["cost"]),
            cost_by_agent={k: Cost(**v) for k, v in data["cost_by_agent"].items()},
            turns=turns,
            info=data.get("info", {}),
            images=tuple(data.get("images", ())),
        )
