"""The seams of the agent layer: ``Agent`` (acts in a game), ``Generator`` (makes text) and
``BatchedAgent`` (an agent the rollout engine batches and learners can train)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from councilzoo.envs.types import Action, Mode, TurnContext

__all__ = ["Agent", "Sampling", "Completion", "Generator", "accepts_images", "Request", "BatchedAgent"]


@runtime_checkable
class Agent(Protocol):
    """Anything that maps a batch of turn contexts to a batch of actions, in order.

    Batched so that one call can serve many environments at once (one generate call per model
    per tick in the rollout engine).
    """

    def act(self, contexts: list[TurnContext]) -> list[Action]: ...


@dataclass(frozen=True)
class Sampling:
    """Decoding settings shared by every generator backend."""

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass
class Completion:
    """One sampled continuation. ``logprobs`` are per completion token under the sampling model."""

    text: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"  # "stop" | "length" | "error"
    prompt_token_ids: list[int] = field(default_factory=list)


@runtime_checkable
class Generator(Protocol):
    """A text backend. ``prompts`` are chat message lists (``[{"role", "content"}, ...]``) or
    already-rendered strings; the result holds ``n`` completions per prompt, in prompt order.

    A backend that reads images sets ``accepts_images = True`` and takes user contents that are
    lists of ``{"type": "image", "image": ...}`` / ``{"type": "text", "text": ...}`` parts; agents
    send image parts only to such backends (``accepts_images``)."""

    def generate(
        self, prompts: list, n: int = 1, sampling: Sampling | None = None
    ) -> list[list[Completion]]: ...


def accepts_images(generator: object) -> bool:
    """Whether ``generator`` reads image parts (backends without the attribute are text-only)."""
    return bool(getattr(generator, "accepts_images", False))


@dataclass
class Request:
    """One planned turn: the chosen mode and, for speaking modes, the prompt and sample count."""

    context: TurnContext
    mode: Mode
    messages: list[dict] | None = None  # None: silent turn, no model call
    n: int = 1


@runtime_checkable
class BatchedAgent(Protocol):
    """An agent whose turns the rollout engine batches with every other agent on its generator.

    ``act`` split in two halves: ``plan`` chooses each turn's mode and renders its prompt
    (``Request``), the engine makes one ``generator.generate`` call per (generator, sampling) per
    tick for all agents sharing them, then ``finish`` turns each request's completions into the
    action and the completion it commits to. The engine attaches that completion's prompt and
    completion token ids and log-probs to the episode's ``Turn``, which is what learners train
    on. ``LLMAgent`` is one; a custom LLM agent implementing these gets the same batching.
    """

    generator: Generator
    sampling: Sampling

    def act(self, contexts: list[TurnContext]) -> list[Action]: ...

    def plan(self, contexts: list[TurnContext]) -> list[Request]: ...

    def finish(self, request: Request, completions: list[Completion]) -> tuple[Action, Completion | None]: ...

