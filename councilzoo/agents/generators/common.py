"""What every generation backend shares: request checks, prompt rendering, seeds, model lookup.

Rendering lives here so that the transformers and vLLM backends feed the model the very same
prompt token ids (vLLM receives ids, never text), which is what makes their greedy outputs
comparable token for token.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from councilzoo.agents.base import Sampling

_SEED_BOUND = 2**31 - 1  # vLLM and OpenAI-compatible servers take 32-bit seeds


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


def render_prompt(tokenizer, prompt: str | list[dict]) -> list[int]:
    """Prompt token ids: chat messages through the tokenizer's chat template (with the assistant
    generation prompt), strings taken as already rendered. No special tokens are added in either
    case: a chat template writes its own, and a rendered string already holds them."""
    if isinstance(prompt, str):
        text = prompt
    else:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no chat template: pass "
                "already-rendered strings, or set tokenizer.chat_template"
            )
        text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def prompt_seeds(seed: int, count: int) -> list[int]:
    """``count`` distinct per-prompt seeds derived from one seed, so prompts sharing a call do not
    share random draws (a single seed per request would correlate their samples)."""
    return [int(s) for s in np.random.default_rng(seed).integers(0, _SEED_BOUND, size=count)]


def resolve_model_path(name_or_path: str | os.PathLike) -> str:
    """A local directory holding the model: the path itself, else the Hugging Face cache's copy
    of the hub name, else a download (only when the hub is reachable and not disabled).

    Raises ``ModelNotCachedError`` with the remedy when none of these works, instead of the
    hub client's network traceback.
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return str(path)
    name = str(name_or_path)
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
