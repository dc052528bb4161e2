"""The ``Generator`` contract at both ends of a ``generate`` call: the request checked before any
work starts (``check_request``), the reply checked before anyone reads it (``checked_generate``),
and the errors a backend raises.
"""

from __future__ import annotations

from councilzoo.agents.base import Completion, Sampling

__all__ = ["GenerationError", "GeneratorContractError", "check_request", "checked_generate"]


class GenerationError(RuntimeError):
    """A backend could not produce completions (server down, retries exhausted, bad reply).

    ``partial`` holds, in prompt order, the completions that did finish before the failure
    (``None`` for prompts that did not), so a caller can keep finished work.
    """

    def __init__(self, message: str, partial: list | None = None):
        super().__init__(message)
        self.partial = partial


class GeneratorContractError(GenerationError):
    """A backend's ``generate`` returned something else than ``n`` Completions per prompt."""


def check_request(prompts: list, n: int, sampling: Sampling | None) -> Sampling:
    """Validate a ``generate`` call before any work starts; return the sampling settings to use."""
    if not isinstance(prompts, list):
        raise TypeError(
            f"prompts must be a list of chat message lists or strings, got {type(prompts).__name__}"
        )
    for i, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            continue
        if not (
            isinstance(prompt, list)
            and prompt
            and all(isinstance(m, dict) and "role" in m and "content" in m for m in prompt)
        ):
            raise TypeError(
                f"prompts[{i}] must be a string or a non-empty list of {{'role', 'content'}} dicts, "
                f"got {prompt!r:.80}"
            )
        for message in prompt:
            if not isinstance(message["content"], str):
                _check_parts(message["content"], i)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    sampling = Sampling() if sampling is None else sampling
    if not isinstance(sampling, Sampling):
        raise TypeError(f"sampling must be a Sampling, got {type(sampling).__name__}")
    if sampling.max_new_tokens < 1:
        raise ValueError(f"Sampling.max_new_tokens must be >= 1, got {sampling.max_new_tokens}")
    if sampling.temperature < 0:
        raise ValueError(f"Sampling.temperature must be >= 0 (0 = greedy), got {sampling.temperature}")
    if not 0 < sampling.top_p <= 1:
        raise ValueError(f"Sampling.top_p must be in (0, 1], got {sampling.top_p}")
    if isinstance(sampling.stop, str) or not all(isinstance(s, str) and s for s in sampling.stop):
        raise ValueError(f"Sampling.stop must be a tuple of non-empty strings, got {sampling.stop!r}")
    return sampling


def _check_parts(content, index: int) -> None:
    """A content-part list: text parts with a str, image parts with a PIL image or a path."""
    from councilzoo.tasks.images import is_image_input

    if not isinstance(content, list):
        raise TypeError(f"prompts[{index}]: message content must be a str or a list of parts")
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            continue
        if kind == "image" and is_image_input(part.get("image")):
            continue
        raise TypeError(
            f"prompts[{index}]: content parts must be {{'type': 'text', 'text': str}} or "
            f"{{'type': 'image', 'image': PIL image or path}}, got {part!r:.80}"
        )


def checked_generate(generator, prompts: list, n: int, sampling: Sampling | None) -> list[list[Completion]]:
    """``generator.generate(prompts, n, sampling)`` with the Generator contract checked: one list of
    ``n`` Completions with str text per prompt. A broken backend (built in or a user's) fails here,
    naming its class, instead of being recorded as "no answer" or misaligning prompts downstream."""
    results = generator.generate(prompts, n=n, sampling=sampling)
    breach = _contract_breach(results, len(prompts), n)
    if breach is not None:
        backend = f"{type(generator).__module__}.{type(generator).__qualname__}"
        raise GeneratorContractError(
            f"generator {backend} broke the Generator contract: {breach}; generate(prompts, n, sampling) "
            "must return one list of n Completions per prompt, in prompt order"
        )
    return results


def _contract_breach(results, num_prompts: int, n: int) -> str | None:
    """What is wrong with a ``generate`` reply, or None."""
    if not isinstance(results, (list, tuple)):
        return f"it returned a {type(results).__name__}, not a list"
    if len(results) != num_prompts:
        return f"{len(results)} result lists for {num_prompts} prompts"
    for i, completions in enumerate(results):
        if not isinstance(completions, (list, tuple)):
            return f"prompt {i}: a {type(completions).__name__}, not a list of Completions"
        if len(completions) != n:
            return f"prompt {i}: {len(completions)} completions, asked for n={n}"
        for j, completion in enumerate(completions):
            if not isinstance(completion, Completion):
                return f"prompt {i}, completion {j}: a {type(completion).__name__}, not a Completion"
            if not isinstance(completion.text, str):
                return f"prompt {i}, completion {j}: text {completion.text!r} is not a str"
    return None
