"""LLM agents: prompt renderer + generator + parser, batched over many turns.

``LLMAgent.act`` makes ONE ``generate`` call for the whole batch of contexts. The rollout engine
goes further and merges the requests of every agent that shares a generator into one call per
tick; it uses the two halves of ``act`` named by ``agents.base.BatchedAgent``: ``plan`` (choose
modes, render prompts) and ``finish`` (parse completions into actions), with
``generate_requests`` in between.

Samples per turn: the escalation anchor draws ``n`` samples for self-consistency (the env's
``extras["num_samples"]`` hint, else ``samples_per_turn["anchor"]``), a cohort member ``G``.
The action's ``text`` is the sample whose answer is the plurality (the first such), ``samples``
all of them. Bad output parses to "no answer"; generator errors, and a reply that breaks the
Generator contract (a GeneratorContractError naming the backend), propagate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from councilzoo.agents.base import Completion, Generator, Request, Sampling, accepts_images
from councilzoo.agents.controllers.contract import Controller, default_mode, is_silent
from councilzoo.agents.generators.checks import checked_generate
from councilzoo.agents.parsing import parse_action
from councilzoo.agents.prompts import MAX_CHARS, check_prompt_style, render_messages
from councilzoo.envs.types import Action, Mode, TurnContext
from councilzoo.tasks import plurality

__all__ = ["call_sampling", "generate_requests", "LLMAgent"]


def call_sampling(sampling: Sampling, call: int) -> Sampling:
    """``sampling`` for the ``call``-th generate call: a fixed ``seed`` becomes a per-call seed.

    Backends reseed from ``Sampling.seed`` on every call, so one fixed seed would make every
    call with equal prompts (three debate peers opening on the same question) sample the same
    text. Deriving the seed from (seed, call) keeps runs reproducible without that artefact.
    """
    if sampling.seed is None:
        return sampling
    return replace(sampling, seed=(sampling.seed * 1_000_003 + call) % 2**62)


def generate_requests(
    generator: Generator, requests: list[Request], sampling: Sampling
) -> list[list[Completion]]:
    """One ``generate`` call for every speaking request; returns completions per request.

    Requests with different ``n`` are flattened (a prompt repeated ``n`` times with ``n=1``) so
    that the call stays single. Silent requests get ``[]``. The reply is checked against the
    Generator contract (``checked_generate``).
    """
    speaking = [r for r in requests if r.messages is not None]
    out: dict[int, list[Completion]] = {id(r): [] for r in requests}
    if not speaking:
        return [out[id(r)] for r in requests]
    counts = {r.n for r in speaking}
    if len(counts) == 1:
        results = checked_generate(generator, [r.messages for r in speaking], counts.pop(), sampling)
        for request, completions in zip(speaking, results, strict=True):
            out[id(request)] = list(completions)
    else:
        prompts = [r.messages for r in speaking for _ in range(r.n)]
        flat = iter(checked_generate(generator, prompts, 1, sampling))
        for request in speaking:
            out[id(request)] = [next(flat)[0] for _ in range(request.n)]
    return [out[id(r)] for r in requests]


class LLMAgent:
    """An agent backed by a ``Generator``; modes from ``controller`` (default: speak when legal).

    ``prompt_style`` picks the prompt texts (``councilzoo.agents.prompts.PROMPT_STYLES``: "default"
    asks to think step by step and box the answer, "concise" asks small models for the number);
    ``role_prompts`` / ``instructions`` override them per role;
    ``samples_per_turn`` maps a role to its number of samples (default anchor 5, member 4, others
    1); ``max_chars`` bounds each quoted utterance in the prompt. ``render`` replaces the prompt
    renderer altogether (``TurnContext -> chat messages``), e.g. for a model fine-tuned on its own
    prompt format; modes, sampling, batching and parsing stay the same. A problem's images go
    into the prompt when the generator ``accepts_images``; a text-only generator gets the text
    and a note that the question shows images it cannot see.
    """

    def __init__(
        self,
        generator: Generator,
        *,
        role_prompts: Mapping[str, str] | None = None,
        instructions: Mapping[str, str] | None = None,
        controller: Controller | None = None,
        sampling: Sampling | None = None,
        samples_per_turn: Mapping[str, int] | None = None,
        max_chars: int = MAX_CHARS,
        render: Callable[[TurnContext], list[dict[str, str]]] | None = None,
        name: str = "llm",
        prompt_style: str = "default",
    ) -> None:
        if not isinstance(generator, Generator):
            raise TypeError(f"LLMAgent {name!r}: generator must implement generate(prompts, n, sampling), "
                            f"got {type(generator).__name__}")
        self.generator = generator
        check_prompt_style(prompt_style)
        self.role_prompts, self.instructions = dict(role_prompts or {}), dict(instructions or {})
        self.prompt_style = prompt_style
        self.controller = controller
        self.sampling = sampling or Sampling()
        self.samples_per_turn = {"anchor": 5, "member": 4, **(samples_per_turn or {})}
        for role, n in self.samples_per_turn.items():
            if int(n) != n or n < 1:
                raise ValueError(
                    f"LLMAgent {name!r}: samples_per_turn[{role!r}] must be an int >= 1, got {n!r}"
                )
        self.max_chars = max_chars
        self.render = render
        self.name = name
        self._with_images = accepts_images(generator)
        self._calls = 0

    def __repr__(self) -> str:
        return f"LLMAgent({self.name!r}, generator={type(self.generator).__name__})"

    def plan(self, contexts: list[TurnContext]) -> list[Request]:
        """Choose each turn's mode and render the prompt of every speaking turn."""
        modes = self.controller.choose(contexts) if self.controller else [default_mode(c) for c in contexts]
        requests = []
        for ctx, mode in zip(contexts, modes, strict=True):
            mode = Mode(mode)
            if is_silent(mode):
                requests.append(Request(ctx, mode))
                continue
            n = int(ctx.extras.get("num_samples", self.samples_per_turn.get(ctx.role, 1)))
            messages = (
                self.render(ctx) if self.render is not None
                else render_messages(
                    ctx, self.role_prompts, self.instructions, max_chars=self.max_chars,
                    with_images=self._with_images, style=self.prompt_style,
                )
            )
            requests.append(Request(ctx, mode, messages, n))
        return requests

    def finish(self, request: Request, completions: list[Completion]) -> tuple[Action, Completion | None]:
        """The action for ``request`` and the completion it commits to (None for silent turns)."""
        if request.messages is None:
            return Action(request.mode), None
        ctx = request.context
        if not completions:  # a backend that returned nothing: no answer, still a call
            return Action(request.mode, calls=request.n), None
        kind, role, mode = ctx.problem.kind, ctx.role, request.mode
        parsed = [  # a reply at the token limit is truncated: its unfinished end states nothing
            parse_action(c.text, role, kind, mode=mode, truncated=c.finish_reason == "length")
            for c in completions
        ]
        index = 0
        if len(parsed) > 1:
            top, _ = plurality([p.answer for p in parsed], ctx.problem.kind)
            index = next((i for i, p in enumerate(parsed) if top is not None and p.answer == top), 0)
        action = parsed[index]
        if len(completions) > 1:
            action.samples = tuple(c.text for c in completions)
            action.samples_truncated = tuple(p.truncated for p in parsed)
        action.prompt_tokens = completions[0].prompt_tokens  # one prompt, shared by the samples
        action.completion_tokens = sum(c.completion_tokens for c in completions)
        action.calls = len(completions)  # the envs' convention: one call per text produced
        return action, completions[index]

    def act(self, contexts: list[TurnContext]) -> list[Action]:
        requests = self.plan(contexts)
        results = generate_requests(self.generator, requests, call_sampling(self.sampling, self._calls))
        self._calls += 1
        return [self.finish(r, c)[0] for r, c in zip(requests, results, strict=True)]
