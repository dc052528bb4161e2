"""Generation backends behind the ``Generator`` protocol (see docs/generators.md).

- ``TransformersGenerator``: a transformers model in this process; the learner trains its
  ``.model`` in place. The reference for log-probabilities.
- ``VLLMGenerator``: vLLM's offline engine; ``load_weights`` syncs RL updates in place.
- ``OpenAIGenerator``: any OpenAI-compatible HTTP endpoint, concurrent, with retries.

Backends are imported on first use, so importing this package pulls in neither torch, vllm
nor httpx. ``make_generator({"backend": ..., ...})`` builds one from a config mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from councilzoo.agents.base import Generator
from councilzoo.agents.generators.checks import GenerationError, GeneratorContractError, checked_generate
from councilzoo.agents.generators.model_lookup import ModelNotCachedError, resolve_model_path
from councilzoo.config import MissingExtraError
from councilzoo.lazy import lazy_attributes

BACKENDS = {
    "transformers": ("councilzoo.agents.generators.transformers_backend", "TransformersGenerator"),
    "vllm": ("councilzoo.agents.generators.vllm_backend", "VLLMGenerator"),
    "openai": ("councilzoo.agents.generators.openai_backend", "OpenAIGenerator"),
}
_CLASSES = {cls: module for module, cls in BACKENDS.values()}


__getattr__ = lazy_attributes(__name__, _CLASSES)


def make_generator(spec: Mapping[str, Any]) -> Generator:
    """Build a generator from a config mapping.

    ``{"backend": "transformers", "model": DIR_OR_NAME, "device": ..., "dtype": ..., "batch_size": ...}``;
    ``{"backend": "vllm", "model": DIR_OR_NAME, **vllm.LLM keyword arguments}``;
    ``{"backend": "openai", "base_url": URL, "model": NAME, "api_key_env": ..., ...}``.
    Every other key is passed to the backend's constructor.
    """
    if not isinstance(spec, Mapping):
        raise TypeError(f"generator spec must be a mapping, got {type(spec).__name__}")
    options = dict(spec)
    backend = options.pop("backend", None)
    if backend not in BACKENDS:
        raise ValueError(f"generator spec needs 'backend' in {sorted(BACKENDS)}, got {backend!r}")
    if "model" not in options:
        raise ValueError(f"generator spec for backend {backend!r} needs a 'model'")
    cls = __getattr__(BACKENDS[backend][1])
    if backend == "openai" and "base_url" not in options:
        raise ValueError("generator spec for backend 'openai' needs a 'base_url'")
    first = (options.pop("base_url"),) if backend == "openai" else ()
    try:
        return cls(*first, options.pop("model"), **options)
    except TypeError as exc:
        raise TypeError(f"generator spec for backend {backend!r}: {exc}") from exc


__all__ = [
    "BACKENDS",
    "GenerationError",
    "GeneratorContractError",
    "MissingExtraError",
    "ModelNotCachedError",
    "OpenAIGenerator",
    "TransformersGenerator",
    "VLLMGenerator",
    "checked_generate",
    "make_generator",
    "resolve_model_path",
]
